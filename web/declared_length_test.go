package web

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"
)

// Clients that declare the largest body an event may have and then send
// five bytes of it hold neither memory sized by what they declared nor
// the large-body slots (largeBodies) a real large event then waits for:
// a body is read as it arrives. (Reading it into a buffer sized by its
// declared length did both.)
func TestDeclaredLengthAloneTakesNoSlotNorMemory(t *testing.T) {
	g := make(largeBodies, 2)
	h := g.gate(func(w http.ResponseWriter, r *http.Request) {
		var v map[string]any
		if err := decodeJSONLimit(w, r, &v, MaxEventBodyBytes, errEventTooLarge); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		w.WriteHeader(204)
	})
	srv := httptest.NewServer(h)
	defer srv.Close()
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	const conns = 12
	var cs []net.Conn
	for range conns {
		c, err := net.Dial("tcp", srv.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		cs = append(cs, c)
		fmt.Fprintf(c, "POST /api/v1/events HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n{\"a\":", MaxEventBodyBytes)
	}
	defer func() {
		for _, c := range cs {
			c.Close()
		}
	}()
	time.Sleep(1500 * time.Millisecond)
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	grown := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("%d connections that sent 5 body bytes each: heap grew by %d MiB, %d of %d large-body slots held", conns, grown>>20, len(g), cap(g))
	// A legitimate 5 MB event now has to wait for a slot the idle clients hold.
	body := `{"a":"` + strings.Repeat("x", MaxBodyBytes+1000) + `"}`
	done := make(chan int, 1)
	go func() {
		resp, err := http.Post(srv.URL, "application/json", strings.NewReader(body))
		if err != nil {
			done <- -1
			return
		}
		resp.Body.Close()
		done <- resp.StatusCode
	}()
	select {
	case code := <-done:
		t.Logf("a 4 MiB+ body went through: %d", code)
	case <-time.After(3 * time.Second):
		t.Errorf("a real large body waited >3s for a slot held by clients that sent 5 bytes")
	}
	if grown > 64<<20 {
		t.Errorf("heap grew by %d MiB for %d connections that sent 5 body bytes each", grown>>20, conns)
	}
	if len(g) > 0 {
		t.Errorf("%d large-body slots taken by bodies of 5 bytes", len(g))
	}
}
