package main

import (
	"strconv"
)

// count is n and the noun for n of them, one or many: "1 worker",
// "2 workers".
func count(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}
