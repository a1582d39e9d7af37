//go:build !linux

package main

// rssBytes returns 0: resident size is read from /proc on Linux only.
func rssBytes() int64 { return 0 }
