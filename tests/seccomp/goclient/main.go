// goclient: a Go HTTP client (standard library only), which makes its
// system calls directly, so no LD_PRELOAD shim sees them. Built by the
// seccomp tests and `make bench`.
//
//	goclient URL N CONC [keepalive]
//
// makes N GET requests to URL from CONC goroutines at once, each on a new
// connection (keep-alives off unless "keepalive"), and prints
// ok=K fail=F err=FIRST-ERROR rps=REQUESTS-PER-SECOND done=1.
//
//	goclient hold HOST:PORT N MS
//
// opens N connections from N goroutines at once, keeps each open MS ms,
// then closes it politely (half-close, wait for the server's close), and
// prints ok=K fail=F err=FIRST-ERROR done=1.
package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

func hold(addr string, n, ms int) {
	var ok, fail int64
	var mu sync.Mutex
	first := "none"
	var wg sync.WaitGroup
	for g := 0; g < n; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := net.DialTimeout("tcp", addr, 30*time.Second)
			if err != nil {
				atomic.AddInt64(&fail, 1)
				mu.Lock()
				if first == "none" {
					first = err.Error()
				}
				mu.Unlock()
				return
			}
			time.Sleep(time.Duration(ms) * time.Millisecond)
			c.(*net.TCPConn).CloseWrite()
			io.Copy(io.Discard, c)
			c.Close()
			atomic.AddInt64(&ok, 1)
		}()
	}
	wg.Wait()
	fmt.Printf("ok=%d\nfail=%d\nerr=%s\ndone=1\n", ok, fail, first)
}

func main() {
	if len(os.Args) == 5 && os.Args[1] == "hold" {
		n, _ := strconv.Atoi(os.Args[3])
		ms, _ := strconv.Atoi(os.Args[4])
		hold(os.Args[2], n, ms)
		return
	}
	if len(os.Args) < 4 {
		fmt.Fprintln(os.Stderr, "usage: goclient URL N CONC [keepalive]")
		os.Exit(2)
	}
	url := os.Args[1]
	n, _ := strconv.Atoi(os.Args[2])
	conc, _ := strconv.Atoi(os.Args[3])
	keep := len(os.Args) > 4 && os.Args[4] == "keepalive"
	tr := &http.Transport{DisableKeepAlives: !keep, MaxIdleConnsPerHost: conc}
	client := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	var ok, fail int64
	var mu sync.Mutex
	first := "none"
	var next int64 = -1
	var wg sync.WaitGroup
	t0 := time.Now()
	for g := 0; g < conc; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for atomic.AddInt64(&next, 1) < int64(n) {
				resp, err := client.Get(url)
				if err == nil {
					_, err = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
				if err != nil {
					atomic.AddInt64(&fail, 1)
					mu.Lock()
					if first == "none" {
						first = err.Error()
					}
					mu.Unlock()
					continue
				}
				atomic.AddInt64(&ok, 1)
			}
		}()
	}
	wg.Wait()
	secs := time.Since(t0).Seconds()
	fmt.Printf("ok=%d\nfail=%d\nerr=%s\nrps=%.0f\ndone=1\n", ok, fail, first,
		float64(ok)/secs)
}
