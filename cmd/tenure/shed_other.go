//go:build !linux

package main

// shedStartupPages does nothing where /proc does not map the executable.
func shedStartupPages() {}
