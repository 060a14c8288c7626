// Command freeport prints free TCP ports on 127.0.0.1, one per line.
//
//	go run ./scripts/freeport 4
//
// It holds every listener open until all N ports are chosen, so the ports are
// distinct, then closes them and prints them. A port can still be taken by another
// process before the caller binds it; scripts/testservers.sh fails with the server's
// log if that happens.
package main

import (
	"fmt"
	"net"
	"os"
	"strconv"
)

func main() {
	n := 1
	if len(os.Args) > 2 {
		fmt.Fprintln(os.Stderr, "usage: freeport [N]")
		os.Exit(2)
	}
	if len(os.Args) == 2 {
		v, err := strconv.Atoi(os.Args[1])
		if err != nil || v < 1 || v > 100 {
			fmt.Fprintf(os.Stderr, "freeport: N must be an integer from 1 to 100, got %q\n", os.Args[1])
			os.Exit(2)
		}
		n = v
	}
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			fmt.Fprintln(os.Stderr, "freeport:", err)
			os.Exit(1)
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	for _, p := range ports {
		fmt.Println(p)
	}
}
