package web

import (
	"context"
	"io"
	"net/http"
)

// largeBodies lets only a few requests at once read a body past
// MaxBodyBytes. An event body may be up to MaxEventBodyBytes (a fan-out
// names up to 100,000 recipients inline), and reading and decoding one
// costs several times its size in memory; eight at once took lull past a
// gigabyte. A request waits for a slot when its body grows past the
// ordinary limit and keeps it until its handler returns, so small
// requests are never held up by large ones.
type largeBodies chan struct{}

// gate wraps h so that its request body takes a slot once it passes
// MaxBodyBytes.
func (g largeBodies) gate(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		b := &gatedBody{ReadCloser: r.Body, ctx: r.Context(), slots: g}
		r.Body = b
		defer b.release()
		h(w, r)
	}
}

// gatedBody counts what is read and takes a slot at MaxBodyBytes.
type gatedBody struct {
	io.ReadCloser
	ctx   context.Context
	slots largeBodies
	read  int64
	held  bool
}

func (b *gatedBody) Read(p []byte) (int, error) {
	if !b.held && b.read+int64(len(p)) > MaxBodyBytes {
		select {
		case b.slots <- struct{}{}:
			b.held = true
		case <-b.ctx.Done():
			return 0, b.ctx.Err()
		}
	}
	n, err := b.ReadCloser.Read(p)
	b.read += int64(n)
	return n, err
}

func (b *gatedBody) release() {
	if b.held {
		<-b.slots
		b.held = false
	}
}
