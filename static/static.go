// Package static embeds lull's CSS and small scripts and serves them under
// content-hashed URLs, so browsers may cache them forever and a new
// release is picked up at once.
package static

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"net/http"
	"path"
	"strings"
)

//go:embed *.css *.js favicon.ico
var files embed.FS

// Assets maps file names to their hashed URLs and serves them.
type Assets struct {
	urls  map[string]string // "app.css" -> "/static/app.3f2a1b.css"
	files map[string]string // "app.3f2a1b.css" -> "app.css"
}

// New hashes every embedded file.
func New() *Assets {
	a := &Assets{urls: map[string]string{}, files: map[string]string{}}
	entries, _ := fs.ReadDir(files, ".")
	for _, e := range entries {
		b, _ := files.ReadFile(e.Name())
		sum := sha256.Sum256(b)
		ext := path.Ext(e.Name())
		hashed := strings.TrimSuffix(e.Name(), ext) + "." + hex.EncodeToString(sum[:6]) + ext
		a.urls[e.Name()] = "/static/" + hashed
		a.files[hashed] = e.Name()
	}
	return a
}

// URL is the hashed URL of a file, such as "app.css".
func (a *Assets) URL(name string) string { return a.urls[name] }

// ServeHTTP serves /static/<hashed name> with a year-long cache, and
// /favicon.ico.
func (a *Assets) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/favicon.ico" {
		// Browsers ask for this address by name, so it cannot be hashed.
		w.Header().Set("Cache-Control", "public, max-age=86400")
		http.ServeFileFS(w, r, files, "favicon.ico")
		return
	}
	name, ok := a.files[path.Base(r.URL.Path)]
	if !ok {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Cache-Control", "public, max-age=31536000, immutable")
	http.ServeFileFS(w, r, files, name)
}
