package e2e

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
)

// chromiumBinary is Debian's chromium (make deps installs it: e2e/scripts/install-deps.sh).
func chromiumBinary(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("chromium")
	require.NoError(t, err, "headless Chromium opens Polyaxon's web UI: run make deps (e2e/scripts/install-deps.sh installs Debian's chromium)")
	return path
}

// webUIPage is what a page of the web UI shows: its visible text and the targets of its links.
type webUIPage struct {
	Text  string   `json:"text"`
	Links []string `json:"links"`
}

// headlessChromiumTrusting is headlessChromium trusting the https server's certificate cert by
// its public key, and no other: Chromium takes no CA of its own without a certificate
// database, and a page served with any other certificate fails to load.
func headlessChromiumTrusting(t *testing.T, cert *x509.Certificate) context.Context {
	spki := sha256.Sum256(cert.RawSubjectPublicKeyInfo)
	return headlessChromium(t, chromedp.Flag("ignore-certificate-errors-spki-list", base64.StdEncoding.EncodeToString(spki[:])))
}

// headlessChromium starts a headless Chromium for the test, with extra options (flags) if
// given; openWebUI opens pages in it.
func headlessChromium(t *testing.T, extra ...chromedp.ExecAllocatorOption) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumBinary(t)), chromedp.UserDataDir(t.TempDir()), chromedp.Flag("disable-gpu", true))
	opts = append(opts, extra...)
	if os.Geteuid() == 0 {
		opts = append(opts, chromedp.NoSandbox) // Chromium refuses to run its sandbox as root
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	// The browser lives as long as the context of its first run: start it here.
	require.NoError(t, chromedp.Do(ctx), "start headless Chromium")
	return ctx
}

// openWebUI opens url in a new tab of browser and returns the page once its text contains
// every one of text and it links to every one of links (paths, as the page writes them). The
// UI renders from the API after the page loads, so it polls; it loads the page again after
// a minute without them (the API may be between two gateway pods), until timeout. On failure
// it reports what the page showed and the requests that failed (a UI whose scripts are not
// served shows only its loading spinner).
func openWebUI(t *testing.T, browser context.Context, url string, timeout time.Duration, text, links []string) webUIPage {
	t.Helper()
	var mu sync.Mutex
	var failed []string
	requests := map[network.RequestID]string{}
	ctx, cancel := chromedp.NewContext(browser, chromedp.WithListener(func(ev any) {
		mu.Lock()
		defer mu.Unlock()
		switch e := ev.(type) {
		case *network.EventRequestWillBeSent:
			requests[e.RequestID] = e.Request.URL
		case *network.EventResponseReceived:
			if e.Response.Status >= 400 {
				failed = append(failed, fmt.Sprintf("%s: HTTP %d", e.Response.URL, e.Response.Status))
			}
		case *network.EventLoadingFailed:
			failed = append(failed, fmt.Sprintf("%s: %s", requests[e.RequestID], e.ErrorText))
		}
	}))
	defer cancel()

	const shown = `({text: document.body.innerText, links: [...document.querySelectorAll("a[href]")].map((a) => a.getAttribute("href"))})`
	const predicate = `(text, links) => { const p = ` + shown + `; return text.every((s) => p.text.includes(s)) && links.every((l) => p.links.includes(l)) && p; }`
	deadline := time.Now().Add(timeout)
	var err error
	for time.Now().Before(deadline) {
		mu.Lock()
		failed = nil
		mu.Unlock()
		if err = chromedp.Do(ctx, chromedp.Navigate(url)); err != nil {
			time.Sleep(2 * time.Second)
			continue
		}
		wait := min(time.Until(deadline), time.Minute)
		var page webUIPage
		page, err = chromedp.Run(ctx, chromedp.PollFunction[webUIPage](predicate,
			chromedp.WithPollingArgs(text, links), chromedp.WithPollingInterval(500*time.Millisecond), chromedp.WithPollingTimeout(wait)))
		if err == nil {
			return page
		}
	}
	last, _ := chromedp.Run(ctx, chromedp.Evaluate[webUIPage](shown))
	mu.Lock()
	defer mu.Unlock()
	require.FailNowf(t, "the web UI does not show what it should",
		"%s does not show %q and link to %q within %s: %v\n--- the page's text\n%s\n--- its links\n%s\n--- its failed requests\n%s",
		url, text, links, timeout, err, last.Text, strings.Join(last.Links, "\n"), strings.Join(failed, "\n"))
	return webUIPage{}
}

// signInForm is one page of a sign-in: the inputs to type into (name, value), then the form
// that holds submit (a CSS selector of an element in it) is submitted.
type signInForm struct {
	fill   [][2]string
	submit string
}

// signIn opens url (a sign-in page, or an address that leads to one) in a tab of browser,
// fills in and submits each form in turn as its page comes, and waits until the tab's
// address starts with landed. The browser keeps the session's cookies, so the tabs it opens
// afterwards are signed in.
func signIn(t *testing.T, browser context.Context, url, landed string, timeout time.Duration, forms ...signInForm) {
	t.Helper()
	ctx, cancel := chromedp.NewContext(browser)
	defer cancel()
	ctx, cancelTimeout := context.WithTimeout(ctx, timeout)
	defer cancelTimeout()
	steps := []chromedp.Action[chromedp.Void]{chromedp.Navigate(url)}
	for _, f := range forms {
		steps = append(steps, chromedp.WaitReady(f.submit))
		for _, in := range f.fill {
			input := `input[name="` + in[0] + `"]`
			steps = append(steps, chromedp.WaitVisible(input), chromedp.SendKeys(input, in[1]))
		}
		steps = append(steps, chromedp.Submit(f.submit))
	}
	// Landed: the address, on a page without the last form (a sign-in page may be served at
	// the address it leads back to).
	last, _ := json.Marshal(forms[len(forms)-1].submit)
	landedJS := `document.querySelector(` + string(last) + `) === null ? location.href : ""`
	var at string
	err := chromedp.Do(ctx, steps...)
	for err == nil && ctx.Err() == nil {
		// Between two pages the page cannot be read: try again.
		if loc, err := chromedp.Run(ctx, chromedp.Evaluate[string](landedJS)); err == nil && strings.HasPrefix(loc, landed) {
			return
		}
		time.Sleep(300 * time.Millisecond)
	}
	// The tab is still open (its deadline has passed, not its cancel): what it shows.
	shown, cancelShown := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancelShown()
	at, _ = chromedp.Run(shown, chromedp.Location())
	text, _ := chromedp.Run(shown, chromedp.Evaluate[string](`document.body.innerText`))
	require.FailNowf(t, "the sign-in did not land", "signing in from %s: %v; the browser is at %s, not %s*\n--- the page's text\n%s", url, err, at, landed, text)
}
