package web

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestLargeBodiesTakeTurns: while the only slot is held by one request
// reading a large body, a second large body waits at MaxBodyBytes and a
// small one goes through; the second reads on once the first returns.
func TestLargeBodiesTakeTurns(t *testing.T) {
	t.Parallel()
	g := make(largeBodies, 1)
	big := bytes.Repeat([]byte("x"), MaxBodyBytes+1)
	inFirst, leaveFirst := make(chan struct{}), make(chan struct{})
	readTo := make(chan int, 3)
	handler := func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		readTo <- int(n)
		if r.URL.Path == "/first" {
			if len(g) != 1 {
				t.Error("a body past MaxBodyBytes was read without taking a slot")
			}
			close(inFirst)
			<-leaveFirst
		}
	}
	serve := func(path string, body []byte) chan struct{} {
		done := make(chan struct{})
		go func() {
			g.gate(handler)(httptest.NewRecorder(), httptest.NewRequest("POST", path, bytes.NewReader(body)))
			close(done)
		}()
		return done
	}
	first := serve("/first", big)
	<-inFirst
	if n := <-readTo; n != len(big) {
		t.Fatalf("first read %d bytes", n)
	}
	second := serve("/second", big)
	small := serve("/small", []byte("{}"))
	<-small
	if n := <-readTo; n != 2 {
		t.Fatalf("the small body read %d bytes while a large one waited; want it first", n)
	}
	select {
	case <-second:
		t.Fatal("a second large body was read while the only slot was held")
	default:
	}
	close(leaveFirst)
	<-first
	<-second
	if n := <-readTo; n != len(big) {
		t.Fatalf("second read %d bytes", n)
	}
	if len(g) != 0 {
		t.Fatalf("%d slots still held after every request returned", len(g))
	}
}
