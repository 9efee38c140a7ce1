// Command webpod is the real node's ordinary pod (test/node): `webpod serve` logs a line every
// second and answers HTTP on :8080 with its hostname; `webpod echo WORDS...` prints WORDS and exits,
// for kubectl exec; `webpod get URL` prints URL's body (one try, 5 s), for pod-to-pod checks;
// `webpod env NAME` prints the environment variable NAME (downward-API values). Built static and imported into containerd (nothing can be pulled in the suite).
package main

import (
	"fmt"
	"io"
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
	if len(os.Args) == 3 && os.Args[1] == "env" {
		fmt.Println(os.Getenv(os.Args[2]))
		return
	}
	if len(os.Args) == 3 && os.Args[1] == "get" {
		c := &http.Client{Timeout: 5 * time.Second}
		resp, err := c.Get(os.Args[2])
		if err != nil {
			log.Fatal(err)
		}
		defer resp.Body.Close()
		if _, err := io.Copy(os.Stdout, resp.Body); err != nil {
			log.Fatal(err)
		}
		return
	}
	host, _ := os.Hostname()
	go func() {
		for i := 0; ; i++ {
			fmt.Printf("webpod %s tick %d\n", host, i)
			time.Sleep(time.Second) // the pod logs a tick a second (the log that kubectl logs reads)
		}
	}()
	http.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, host) })
	log.Fatal(http.ListenAndServe(":8080", nil))
}
