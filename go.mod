module github.com/statekit/statekit

go 1.26.0

require (
	github.com/stretchr/testify v1.12.1
	modernc.org/sqlite v1.62.0 // pinned exactly: state/vfs builds on its generated lib types (Tsqlite3_vfs, Tsqlite3_io_methods); bump only with the VFS crash and -race tests green
)

require (
	github.com/anishathalye/porcupine v1.3.1
	github.com/mattn/go-isatty v0.0.24
	github.com/redis/go-redis/v9 v9.23.0
	github.com/rogpeppe/go-internal v1.16.0
	go.uber.org/goleak v1.3.0
	golang.org/x/sys v0.49.0
	modernc.org/libc v1.80.1
	pgregory.net/rapid v1.3.0
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/dustin/go-humanize v1.1.0 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/ncruces/go-strftime v1.1.0 // indirect
	github.com/remyoudompheng/bigfft v0.0.0-20230129092748-24d4a6f8daec // indirect
	go.uber.org/atomic v1.12.0 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
	golang.org/x/tools v0.52.0 // indirect
	modernc.org/mathutil v1.7.1 // indirect
	modernc.org/memory v1.12.1 // indirect
)
