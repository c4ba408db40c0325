// Package browsertest drives Debian's chromium from Go tests through
// chromedp. Where no browser is installed the tests skip, except under
// CI=true, where a missing browser is a failure.
package browsertest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// New starts a headless browser for the test and returns a chromedp
// context for one tab; the browser stops when the test ends.
func New(t *testing.T) context.Context {
	t.Helper()
	path := findBrowser()
	if path == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("no chromium found; CI must install it (apt-get install chromium)")
		}
		t.Skip("no chromium found: install it (apt-get install chromium) to run browser tests")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-quic", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1100, 1600),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	// The first Run starts the browser; it must not carry a timeout.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}

// Do runs steps with a time limit.
func Do(t *testing.T, ctx context.Context, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	tctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(tctx, steps...); err != nil {
		t.Fatal(err)
	}
}

// Eval evaluates a JavaScript expression and returns its value.
func Eval[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	tctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	v, err := chromedp.Run(tctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("eval %s: %v", expr, err)
	}
	return v
}

// Screenshot saves the full page as name (a .png) under the artifacts
// folder: docs/screenshots when LULL_SCREENSHOTS=update (for the README),
// else lull-artifacts in the system temp folder.
func Screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	tctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	png, err := chromedp.Run(tctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	dir := filepath.Join(os.TempDir(), "lull-artifacts")
	if os.Getenv("LULL_SCREENSHOTS") == "update" {
		_, file, _, _ := runtime.Caller(0)
		dir = filepath.Join(filepath.Dir(file), "..", "..", "docs", "screenshots")
	}
	os.MkdirAll(dir, 0o755)
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
}

func findBrowser() string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// WaitURL waits until the page's address contains part and the page has
// loaded, so a step after a form submission acts on the new page, not on
// the one being left.
func WaitURL(t *testing.T, ctx context.Context, part string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		tctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		ok, err := chromedp.Run(tctx, chromedp.Evaluate[bool](`location.href.includes(`+strconv.Quote(part)+`) && document.readyState === "complete"`))
		cancel()
		if err == nil && ok {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("page did not reach an address with %q", part)
}

// axeVersion is the axe-core release .ci/run installs.
const axeVersion = "4.11.0"

// axeScript finds axe.min.js: LULL_AXE_JS, else where .ci/run installs
// it (npm install --prefix $XDG_CACHE_HOME/lull/npm).
func axeScript(t *testing.T) []byte {
	t.Helper()
	path := os.Getenv("LULL_AXE_JS")
	if path == "" {
		cache, _ := os.UserCacheDir()
		path = filepath.Join(cache, "lull", "npm", "node_modules", "axe-core", "axe.min.js")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		hint := "npm install --prefix ~/.cache/lull/npm axe-core@" + axeVersion
		if os.Getenv("CI") == "true" {
			t.Fatalf("no axe-core at %s; CI must install it (%s)", path, hint)
		}
		t.Skipf("no axe-core at %s: %s to run the accessibility checks", path, hint)
	}
	return b
}

// Axe runs axe-core on the current page and returns one line per
// violation of any impact, naming the rule and the elements.
func Axe(t *testing.T, ctx context.Context) []string {
	t.Helper()
	src := axeScript(t)
	tctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	// DevTools evaluation is not bound by the page's script policy, so
	// the page's CSP needs no exception for the test.
	if _, err := chromedp.Run(tctx, chromedp.Evaluate[bool](string(src)+";true")); err != nil {
		t.Fatalf("load axe: %v", err)
	}
	lines, err := chromedp.Run(tctx, chromedp.Evaluate[[]string](`axe.run(document, {resultTypes: ["violations"]}).then(r =>
		r.violations.flatMap(v => v.nodes.map(n => v.impact + " " + v.id + ": " + n.target.join(" ") + " — " + n.failureSummary.replace(/\s+/g, " "))))`,
		chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("axe: %v", err)
	}
	return lines
}

// Tab presses the Tab key once.
func Tab(t *testing.T, ctx context.Context) {
	t.Helper()
	Do(t, ctx, chromedp.KeyEvent("\t"))
}
