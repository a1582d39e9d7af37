//go:build !unix

package main

import "errors"

type benchFlock struct{}

func openFlock(string) (*benchFlock, error) { return nil, errors.New("flock: unix only") }
func (l *benchFlock) lock() error           { return nil }
func (l *benchFlock) unlock()               {}
func (l *benchFlock) Close() error          { return nil }
