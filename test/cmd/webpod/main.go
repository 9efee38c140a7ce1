// Command webpod is the real node's ordinary pod (test/node): `webpod serve` logs a line every
// second and answers HTTP on :8080 with its hostname; `webpod echo WORDS...` prints WORDS and exits,
// for kubectl exec. Built static and imported into containerd (nothing can be pulled in the suite).
package main

import (
	"fmt"
	"log"
	"net/http"
	"os"
	"strings"
	"time"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "echo" {
		fmt.Println(strings.Join(os.Args[2:], " "))
		return
	}
	host, _ := os.Hostname()
	go func() {
		for i := 0; ; i++ {
			fmt.Printf("webpod %s tick %d\n", host, i)
			time.Sleep(time.Second)
		}
	}()
	http.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, host) })
	log.Fatal(http.ListenAndServe(":8080", nil))
}
