// Package doccheck holds a test, and nothing else: that every test, fuzz
// target, example and benchmark README.md, CORRECTNESS.md and the packages'
// doc.go files name as the proof of a promise exists, and so does every
// source file they point to. A test renamed or removed without its
// promise fails it.
package doccheck
