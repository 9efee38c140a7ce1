// Command pause is the real node's sandbox ("pause") image: it holds a pod's namespaces and waits
// for a signal. Built static and imported into containerd (nothing can be pulled in the suite).
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	c := make(chan os.Signal, 1)
	signal.Notify(c, syscall.SIGTERM, syscall.SIGINT)
	<-c
}
