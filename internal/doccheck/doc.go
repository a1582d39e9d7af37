// Package doccheck holds tests, and nothing else, that the documents keep
// up with the code: every test, fuzz target, example and benchmark that
// README.md, CORRECTNESS.md and the packages' doc.go files name as the
// proof of a promise exists, so does every source file they point to, and
// README's canary table has a line for every planted bug, and every
// regression they cite as a replay line is a line of the simulator's
// regression file. A test renamed or removed under its promise fails them.
package doccheck
