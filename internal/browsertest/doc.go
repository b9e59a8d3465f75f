// Package browsertest drives the operator console in a real browser: a
// headless Debian Chromium started once per test package and controlled
// through the Chrome DevTools Protocol (chromedp), a tab per test with its
// own cookies, full-page screenshots and an axe-core accessibility check run
// inside the page.
//
// Its tests run the whole relay (the upstream simulator, the Slack fake,
// a webhook receiver, the service with its ops listener and console) and
// click through the console as an operator would. cmd/relay's
// TestREADMEScreenshot uses it for the README's picture of the demo.
//
// Chromium is found as RELAY_CHROMIUM or as chromium on the PATH (Debian's
// chromium package); axe-core's axe.min.js is read from RELAY_AXE_JS, which
// .ci/run sets after installing axe-core with npm. Without either, a test
// skips with what to install, except under CI=true, where it fails: CI
// never skips the browser tests silently. RELAY_SCREENSHOTS names a folder
// that keeps the screenshots; without it they go to the test's temporary
// folder.
package browsertest
