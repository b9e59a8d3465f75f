//go:build !nodemo

package main

import (
	"bytes"
	"flag"
	"fmt"
	"image/png"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/relay-energy/relay/internal/browsertest"
	"github.com/relay-energy/relay/internal/clock"
	"github.com/relay-energy/relay/internal/testwait"
)

// update makes TestREADMEScreenshot write the README's picture.
var update = flag.Bool("update", false, "write docs/console-now.png, the README's picture of the console during the demo's storm")

// readmeScreenshot is the README's picture, from cmd/relay.
const readmeScreenshot = "../../docs/console-now.png"

// The README's picture: the console's Now page in Chromium during the
// demo's storm (the demo as relay demo runs it, ten times faster). Without
// -update it checks the picture can be made; with -update it writes
// docs/console-now.png:
//
//	go test ./cmd/relay -run TestREADMEScreenshot -args -update
func TestREADMEScreenshot(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the demo and Chromium")
	}
	browser := browsertest.Start()
	t.Cleanup(browser.Close)
	p := browser.Tab(t)
	sc := defaultDemoScript
	clk := clock.NewScaled(time.Now().UTC().Truncate(time.Second), 10)
	d := startDemo(t, demoOptions{rate: 60, seed: 1, script: sc, clock: clk})
	// In by the demo's one-time link, as the person running it does.
	m := d.wait("the console's one-time link",
		regexp.MustCompile(`console   the operator console, in your browser: ((http://\S+/console/)login/once/\S+)`))
	console := m[2]
	p.Do("the one-time link", chromedp.Navigate(m[1]),
		chromedp.WaitVisible(chromedp.CSS(`nav[aria-label="pages"]`)))
	// The storm's alarms, with the demo's first ones and its escalating
	// one, before the first of the storm ends.
	want := sc.StormSize + 4
	testwait.For(t, 60*time.Second, fmt.Sprintf("%d ongoing alarms on Now", want), func() bool {
		p.Do("Now", chromedp.Navigate(console), chromedp.WaitVisible(chromedp.CSS("main table")))
		return browsertest.Eval[int](p, `document.querySelectorAll("main table tr[id^='alarm-']").length`) >= want
	})
	shot := browsertest.Run(p, "the screenshot", chromedp.CaptureScreenshot())
	img, err := png.Decode(bytes.NewReader(shot))
	if err != nil {
		t.Fatalf("the screenshot is no PNG: %v", err)
	}
	if b := img.Bounds(); b.Dx() != browsertest.Width || b.Dy() != browsertest.Height {
		t.Errorf("the screenshot is %dx%d, want %dx%d", b.Dx(), b.Dy(), browsertest.Width, browsertest.Height)
	}
	path := filepath.Join(t.TempDir(), "console-now.png")
	if *update {
		path = readmeScreenshot
	}
	if err := os.WriteFile(path, shot, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s (%d KB)", path, len(shot)/1024)
	// Leave the console before the demo stops (the cleanups stop it before
	// the browser): a live update that comes as it stops would fetch the
	// rows from a listener that is gone, an error of the page.
	p.Do("leaving the console", chromedp.Navigate("about:blank"))
}
