//go:build linux

package state

import (
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Writing past the page cache (O_DIRECT), for the repair's rewrites after a
// failed sync (walrepair.go). On ext4 (Linux 6.18, measured) a range of a
// file whose write-back failed keeps its blocks marked unwritten: a later
// write of the same range through the page cache, and an fdatasync that
// succeeds, leave them so, and once the kernel drops those pages from its
// cache, or the power goes, the range reads back as zeros. A write through
// O_DIRECT marks the blocks written; so does writing them after punching
// them out, but that leaves a moment when the range is zeros on the disk.
// XFS and btrfs kept no such range in the same trials
// (TestKernelFailedSyncOnAThinDisk). A write past the cache waits for the
// disk on every call, so the repair takes that way only for a file whose
// extent map marks some block unwritten (unwritten).

// writeThrough writes p at off in f, bypassing the page cache, and reports
// whether it could: false, having written nothing, when off or len(p) is
// not a multiple of directAlign or the file system refuses O_DIRECT. It
// turns O_DIRECT on for f's open file description and off again after, so
// f must be the caller's alone meanwhile.
func writeThrough(f *os.File, p []byte, off int64) (bool, error) {
	if off%directAlign != 0 || len(p)%directAlign != 0 || len(p) == 0 {
		return false, nil
	}
	fd := int(f.Fd())
	flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
	if err != nil {
		return false, nil
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFL, flags|unix.O_DIRECT); err != nil {
		return false, nil // EINVAL: the file system has no O_DIRECT
	}
	defer func() { _, _ = unix.FcntlInt(uintptr(fd), unix.F_SETFL, flags) }()
	buf := alignedCopy(p)
	for len(buf) > 0 {
		n, err := unix.Pwrite(fd, buf, off)
		if err == unix.EINTR {
			continue
		}
		if err == unix.EINVAL && n <= 0 && len(buf) == len(p) {
			return false, nil // the device wants a larger alignment: nothing written
		}
		if err != nil {
			return true, &os.PathError{Op: "write", Path: f.Name(), Err: err}
		}
		buf, off = buf[n:], off+int64(n)
	}
	return true, nil
}

// alignedCopy returns a copy of p in memory aligned to directAlign.
func alignedCopy(p []byte) []byte {
	raw := make([]byte, len(p)+directAlign)
	skip := int(directAlign - uintptr(unsafe.Pointer(&raw[0]))%directAlign)
	if skip == directAlign {
		skip = 0
	}
	buf := raw[skip : skip+len(p)]
	copy(buf, p)
	return buf
}

// The extent map (FS_IOC_FIEMAP, linux/fiemap.h): the ioctl, the offsets
// in struct fiemap and struct fiemap_extent of the fields used here, and
// the extent flags read.
const (
	fsIocFiemap           = 0xC020660B // _IOWR('f', 11, struct fiemap)
	fiemapLengthOffset    = 8          // fm_length
	fiemapMappedOffset    = 20         // fm_mapped_extents
	fiemapCountOffset     = 24         // fm_extent_count
	fiemapExtentsOffset   = 32         // fm_extents
	fiemapExtentBytes     = 56         // sizeof(struct fiemap_extent)
	fiemapExtentLenOffset = 16         // fe_length
	fiemapFlagsOffset     = 40         // fe_flags
	fiemapBatch           = 64
	fiemapExtentLast      = 0x1
	fiemapExtentUnwritten = 0x800
)

// unwritten reports whether any block of f is marked unwritten in its
// extent map: where a write-back failed on ext4 (above), or a write-back is
// in flight, or space was reserved ahead (fallocate). False where the file
// system keeps no such map (tmpfs), or will not say.
func unwritten(f *os.File) bool {
	buf := make([]uint64, (fiemapExtentsOffset+fiemapBatch*fiemapExtentBytes)/8)
	hdr := unsafe.Pointer(&buf[0])
	for start := uint64(0); ; {
		clear(buf)
		*(*uint64)(hdr) = start
		*(*uint64)(unsafe.Add(hdr, fiemapLengthOffset)) = ^uint64(0) // to the end
		*(*uint32)(unsafe.Add(hdr, fiemapCountOffset)) = fiemapBatch
		if _, _, e := unix.Syscall(unix.SYS_IOCTL, f.Fd(), fsIocFiemap, uintptr(hdr)); e != 0 {
			return false
		}
		mapped := *(*uint32)(unsafe.Add(hdr, fiemapMappedOffset))
		if mapped == 0 {
			return false
		}
		for i := range int(mapped) {
			ext := unsafe.Add(hdr, fiemapExtentsOffset+i*fiemapExtentBytes)
			flags := *(*uint32)(unsafe.Add(ext, fiemapFlagsOffset))
			if flags&fiemapExtentUnwritten != 0 {
				return true
			}
			if flags&fiemapExtentLast != 0 {
				return false
			}
			start = *(*uint64)(ext) + *(*uint64)(unsafe.Add(ext, fiemapExtentLenOffset))
		}
	}
}
