package vfs

import "unsafe"

// SQLite hands the VFS raw addresses (uintptr) of memory it allocated outside
// the Go heap. These helpers turn them into Go values; keeping the conversions
// here keeps the unsafe code in one place.

// cptr returns the address p as an unsafe.Pointer. p points into memory of
// libc's allocator, never into the Go heap.
func cptr(p uintptr) unsafe.Pointer { return *(*unsafe.Pointer)(unsafe.Pointer(&p)) }

// cbytes returns the n bytes at address p as a slice.
func cbytes(p uintptr, n int32) []byte {
	if n <= 0 {
		return nil
	}
	return unsafe.Slice((*byte)(cptr(p)), n)
}

// cstring copies the NUL-terminated string at p; 0 gives "".
func cstring(p uintptr) string {
	if p == 0 {
		return ""
	}
	n := 0
	for *(*byte)(unsafe.Add(cptr(p), n)) != 0 {
		n++
	}
	return string(unsafe.Slice((*byte)(cptr(p)), n))
}

// setFunc stores the top-level Go func f in a C function-pointer slot, the
// way modernc's generated code stores and calls them. f must be a top-level
// func, never a closure, and its signature must be the slot's.
func setFunc[F any](slot *uintptr, f F) {
	*(*F)(unsafe.Pointer(slot)) = f
}
