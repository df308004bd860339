package main

import "time"

// waitTick paces the polls of Install.
func waitTick() <-chan time.Time { return time.After(200 * time.Millisecond) }
