package playground

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/hyperops/hyperops/internal/controlplane"
)

// browser drives Debian's headless Chromium on the playground's page.
type browser struct {
	t    *testing.T
	ctx  context.Context
	pg   *Playground
	shot string // directory of the screenshots
	n    int
}

func startBrowser(t *testing.T, pg *Playground) *browser {
	t.Helper()
	exe, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatalf("no chromium on PATH (%v): `make deps` installs Debian's chromium", err)
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(exe), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck,
		chromedp.WindowSize(1500, 1100), chromedp.UserDataDir(t.TempDir()),
	}
	actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); acancel() })
	// The first run starts the browser for the life of ctx; later runs take their own deadlines.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	root, err := controlplane.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, ".cache", "playground-screenshots")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return &browser{t: t, ctx: ctx, pg: pg, shot: dir}
}

// run runs actions with a deadline, failing the test with what the page showed.
func (b *browser) run(what string, timeout time.Duration, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, timeout)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		b.fail(what, err)
	}
}

func (b *browser) fail(what string, err error) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
	defer cancel()
	text, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body.innerText`))
	b.screenshot("failed")
	log, _ := os.ReadFile(b.pg.BotLog)
	if len(log) > 6000 {
		log = log[len(log)-6000:]
	}
	b.t.Fatalf("%s: %v\n=== the page showed:\n%s\n=== bot log tail:\n%s", what, err, text, log)
}

// waitFor polls a JavaScript expression until it is true.
func (b *browser) waitFor(what, expr string, timeout time.Duration) {
	b.t.Helper()
	b.run("wait for "+what, timeout+5*time.Second, chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingTimeout(timeout),
		chromedp.WithPollingInterval(100*time.Millisecond)))
}

// click presses the element selector names with the mouse. A message redrawn between finding the element and
// pressing it (the bot updated it) is found again, until the deadline.
func (b *browser) click(what, selector string, timeout time.Duration) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, timeout)
	defer cancel()
	for {
		err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(selector)))
		if err == nil {
			return
		}
		if ctx.Err() != nil || !strings.Contains(err.Error(), "node") {
			b.fail(what, err)
		}
	}
}

// screenshot saves the page as NN-name.png.
// openThread presses a message's replies link until the thread panel is open: a click that lands while the page
// redraws (the bot updated the message, or the page reloaded after a confirm) can open nothing.
func (b *browser) openThread(what, selector string, timeout time.Duration) {
	b.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		b.click(what, selector, 10*time.Second)
		ctx, cancel := context.WithTimeout(b.ctx, 3*time.Second)
		_, err := chromedp.Run(ctx, chromedp.Poll[bool](`document.body.classList.contains("thread-open")`,
			chromedp.WithPollingTimeout(2*time.Second), chromedp.WithPollingInterval(100*time.Millisecond)))
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			b.fail(what, err)
		}
	}
}

func (b *browser) screenshot(name string) string {
	b.n++
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		b.t.Logf("screenshot %s: %v", name, err)
		return ""
	}
	path := filepath.Join(b.shot, fmt.Sprintf("%02d-%s.png", b.n, name))
	if err := os.WriteFile(path, png, 0o644); err != nil {
		b.t.Fatal(err)
	}
	b.t.Logf("screenshot %s", path)
	return path
}

// openAs opens the playground's page and switches it to the person key.
func (b *browser) openAs(pg *Playground, key string) {
	b.t.Helper()
	b.run("open the page", 30*time.Second, chromedp.Navigate(pg.URL()), chromedp.WaitVisible(chromedp.ID("persona")))
	b.become(key)
}

// become switches the "you are" selector as a person would, once it offers key: the page fills its options from
// its first read of the playground, which may come after the selector is shown.
func (b *browser) become(key string) {
	b.t.Helper()
	b.waitFor("the selector offering "+key, fmt.Sprintf(`document.querySelector(%q) !== null`, `#persona option[value="`+key+`"]`), 30*time.Second)
	b.run("switch to "+key, 10*time.Second, chromedp.SetValue(chromedp.ID("persona"), key),
		chromedp.Evaluate[chromedp.Void](`document.getElementById("persona").dispatchEvent(new Event("change", {bubbles: true}))`))
	b.waitFor("the page as "+key, fmt.Sprintf(`document.body.dataset.as === %q && document.querySelector(".who") !== null`, key), 10*time.Second)
}

// find waits for a message in container holding text with an element matching inner, and returns a selector
// for that element by the message's ts, which stays true when the page redraws the message.
func (b *browser) find(container, inner, text string, timeout time.Duration) string {
	b.t.Helper()
	expr := fmt.Sprintf(`(() => {
		const msgs = [...document.querySelectorAll(%q)].filter((m) => m.textContent.includes(%q) && m.querySelector(%q));
		return msgs.length ? msgs[msgs.length - 1].dataset.ts : "";
	})()`, container+" .msg", text, inner)
	ctx, cancel := context.WithTimeout(b.ctx, timeout+5*time.Second)
	defer cancel()
	ts, err := chromedp.Run(ctx, chromedp.Poll[string](expr, chromedp.WithPollingTimeout(timeout), chromedp.WithPollingInterval(100*time.Millisecond)))
	if err != nil {
		b.fail(fmt.Sprintf("find %s in a message with %q", inner, text), err)
	}
	return fmt.Sprintf(`%s .msg[data-ts=%q] %s`, container, ts, inner)
}

// inText is a JavaScript test that the element's visible text holds every want.
func inText(selector string, want ...string) string {
	var conds []string
	for _, w := range want {
		conds = append(conds, fmt.Sprintf(`t.includes(%q)`, w))
	}
	return fmt.Sprintf(`(() => { const e = document.querySelector(%q); if (!e) return false; const t = e.textContent; return %s; })()`,
		selector, strings.Join(conds, " && "))
}

// TestBrowserWalkthrough is the walk through the page in headless Chromium: the engineer submits a
// training job and sees its plan with cost and risk; a lead approves; the thread says running, then completed, as
// the kwok Job completes; the agent posts the seed request as a dry run and gets the machine-readable reply; an
// instance group is scaled and the new node appears in the side panel; a capacity report shows its chart.
// Screenshots of each step go to
// .cache/playground-screenshots.
func TestBrowserWalkthrough(t *testing.T) {
	pg := startPlayground(t)
	b := startBrowser(t, pg)
	const long = 90 * time.Second
	b.openAs(pg, "engineer")
	b.waitFor("the side panel with the GPU group", inText("#world", GPUGroup, "2 / 2", "Nodes", "GPUs 0/16"), long)
	b.waitFor("the guided start and the throw-away note", inText("body", "1. Dry-run a training job", "2. Submit it", "3. Scale an instance group", "Throw-away"), 5*time.Second)
	b.screenshot("open")

	// The engineer submits the training job of step 2 from the composer.
	b.run("use step 2", 10*time.Second, chromedp.Click(chromedp.CSS(`[data-step="1"]`)))
	b.waitFor("the composer filled", `document.getElementById("composer-text").value.includes("train submit name=llama-finetune")`, 5*time.Second)
	b.run("send", 10*time.Second, chromedp.SendKeys(chromedp.ID("composer-text"), kb.Enter))
	b.waitFor("the plan with its cost and risk", inText("#messages", "Waiting for approval", "llama-finetune", "Cost", "$", "Risk", "Approve", "Deny"), long)
	b.screenshot("plan")

	// A lead approves it.
	b.become("lead1")
	approve := b.find("#messages", `[data-action="hp_approve"]`, "submit-training-job", long)
	b.click("approve", approve, 10*time.Second)
	// A high-risk plan asks the lead to confirm, as Slack's confirm object does.
	b.waitFor("the confirm dialog", inText("body", "Approve this change?", "high risk"), 10*time.Second)
	b.click("confirm", `[data-confirm-answer="yes"]`, 10*time.Second)
	thread := b.find("#messages", ".replies-link", "submit-training-job", long)
	b.openThread("open the thread", thread, long)
	b.waitFor("the thread saying running", inText("#thread-messages", "llama-finetune", "is running"), long)
	b.screenshot("running")
	b.waitFor("the thread saying completed", inText("#thread-messages", "is completed"), long)
	b.waitFor("the Job completed in the side panel", inText("#workloads", "llama-finetune", "completed"), long)
	b.screenshot("completed")

	// The agent posts the seed request as a dry run and gets the machine-readable reply in the thread.
	b.become("agent")
	b.run("insert the seed", 10*time.Second, chromedp.Click(chromedp.ID("seed-btn")))
	b.waitFor("the seed in the composer", `document.getElementById("composer-text").value.includes('"dryRun": true')`, 5*time.Second)
	b.run("send the seed", 10*time.Second, chromedp.Click(chromedp.ID("send-btn")))
	agentThread := b.find("#messages", ".replies-link", "train-20250308-001", long)
	b.openThread("open the agent's thread", agentThread, long)
	b.waitFor("the machine-readable reply", inText("#thread-messages", `"requestId": "train-20250308-001"`, `"phase": "done"`, `"risk"`, `"cost"`, "message metadata: hyperops_request"), long)
	b.screenshot("agent")

	// The engineer scales the instance group; a lead approves; the new node joins the side panel.
	b.become("engineer")
	b.run("use step 3", 10*time.Second, chromedp.Click(chromedp.CSS(`[data-step="2"]`)))
	b.run("send", 10*time.Second, chromedp.SendKeys(chromedp.ID("composer-text"), kb.Enter))
	b.waitFor("the scale plan", inText("#messages", "scale-capacity", "Waiting for approval"), long)
	b.become("lead2")
	approveScale := b.find("#messages", `[data-action="hp_approve"]`, "scale-capacity", long)
	b.click("approve the scale", approveScale, 10*time.Second)
	// The production cluster raises the scale's risk; if the plan asks for a confirmation, the lead gives it.
	b.waitFor("the confirm dialog or the approval recorded", `document.querySelector('[data-confirm-answer="yes"]') !== null || !document.querySelector('#messages [data-action="hp_approve"]')`, 10*time.Second)
	b.run("confirm if asked", 10*time.Second, chromedp.Evaluate[chromedp.Void](`(() => { const y = document.querySelector('[data-confirm-answer="yes"]'); if (y) y.click(); })()`))
	b.waitFor("three nodes in the group", inText("#world", "3 / 3", "GPUs 0/24"), long)
	b.waitFor("the new node in the node list", `document.querySelectorAll("#nodes tr[data-node]").length === 3`, long)
	b.screenshot("scaled")

	// A capacity report posts its chart as a file, which the page shows as an image served by the playground.
	b.become("engineer")
	b.run("type a report request", 10*time.Second, chromedp.SetValue(chromedp.ID("composer-text"), "/hp report capacity"),
		chromedp.SendKeys(chromedp.ID("composer-text"), kb.Enter))
	// The chart is part of the report message (an image block of the uploaded file), drawn from the playground.
	b.waitFor("the report's chart", `(() => { const img = document.querySelector("#messages .bk-image img");
		return img !== null && img.complete && img.naturalWidth > 100 && img.getAttribute("src").startsWith("/files/"); })()`, long)
	b.screenshot("report")
}

// TestBrowserConfirmModal: approving a delete-storage opens the bot's modal in the page; a wrong claim name is
// refused in the modal (the bot's view_submission errors), the right one counts as the lead's approval.
func TestBrowserConfirmModal(t *testing.T) {
	pg := startPlayground(t)
	b := startBrowser(t, pg)
	const long = 90 * time.Second
	b.openAs(pg, "engineer")
	say := func(text string) {
		b.run("send "+text, 10*time.Second, chromedp.SetValue(chromedp.ID("composer-text"), text), chromedp.SendKeys(chromedp.ID("composer-text"), kb.Enter))
	}
	// The claim exists already (creating one through HyperOps takes two leads too: its price is unknown).
	claim := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "scratch", Namespace: Namespace, Labels: map[string]string{
			"app.kubernetes.io/managed-by": "hyperops", "team": "ml-platform"}},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: ptr.To("kwok-volume"),
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")}}},
	}
	if _, err := pg.Kube.CoreV1().PersistentVolumeClaims(Namespace).Create(t.Context(), claim, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	say("/hp storage delete name=scratch")
	b.waitFor("the deletion awaiting two approvals", inText("#messages", "delete-storage", "Waiting for approval", "critical", "2 approvals"), long)

	b.become("lead1")
	approve := b.find("#messages", `[data-action="hp_approve"]`, "delete-storage", long)
	b.click("approve the deletion", approve, 10*time.Second)
	b.waitFor("the confirmation modal", `(() => { const o = document.getElementById("overlay"); return !o.hidden && o.textContent.includes("Delete storage") && o.querySelector('input[data-block="claim"]') !== null; })()`, long)
	b.run("type a wrong name", 10*time.Second, chromedp.SendKeys(chromedp.CSS(`#overlay input[data-block="claim"]`), "scratchy"),
		chromedp.Click(chromedp.CSS(`#overlay [data-modal="submit"]`)))
	b.waitFor("the modal's error", `(() => { const e = document.querySelector('#overlay [data-error-for="claim"]'); return e !== null && e.textContent.length > 0; })()`, long)
	b.screenshot("modal-error")
	b.run("type the claim name", 10*time.Second, chromedp.SetValue(chromedp.CSS(`#overlay input[data-block="claim"]`), "scratch"),
		chromedp.Click(chromedp.CSS(`#overlay [data-modal="submit"]`)))
	b.waitFor("the modal closed", `document.getElementById("overlay").hidden`, long)
	b.waitFor("one of two approvals", inText("#messages", "delete-storage", "1 given"), long)
	b.screenshot("modal-approved")
	if _, err := pg.Kube.CoreV1().PersistentVolumeClaims(Namespace).Get(t.Context(), "scratch", metav1.GetOptions{}); err != nil {
		t.Fatalf("the claim after one of two approvals: %v, want it kept", err)
	}
}

// TestBrowserHome: the App Home tab, as each persona sees it. As a lead it shows the engineer's waiting request and
// approving it from there works; as the engineer it shows the training job running (in Running now), then
// completed; as a bystander it shows
// nothing of it. The lead's Home is kept as a screenshot.
func TestBrowserHome(t *testing.T) {
	// The job runs for a minute, so the engineer, who opens Home only after the lead's approval is shown, finds it
	// running even on a loaded machine (with the playground's 20 s it had completed by then once in make test).
	const runTime = time.Minute
	pg := startPlaygroundWith(t, Options{JobRunTime: runTime})
	b := startBrowser(t, pg)
	const long = 90 * time.Second
	b.openAs(pg, "engineer")
	b.run("use step 2", 10*time.Second, chromedp.Click(chromedp.CSS(`[data-step="1"]`)))
	b.run("send", 10*time.Second, chromedp.SendKeys(chromedp.ID("composer-text"), kb.Enter))
	b.waitFor("the plan waiting for a lead", inText("#messages", "Waiting for approval", "llama-finetune"), long)

	openHome := func() {
		b.click("open Home", `[data-conv="HOME"]`, 10*time.Second)
		b.waitFor("the Home tab", `document.querySelector("#messages .msg.home") !== null`, long)
	}
	b.become("lead1")
	openHome()
	b.waitFor("the request waiting for the lead", inText("#messages", "Waiting for you (1)", "llama-finetune", "Approve", "Deny"), long)
	b.screenshot("home-lead")
	b.click("approve from Home", `#messages .msg.home [data-action="hp_approve"]`, 10*time.Second)
	b.waitFor("the confirm dialog", inText("body", "Approve this change?"), 10*time.Second)
	b.click("confirm", `[data-confirm-answer="yes"]`, 10*time.Second)
	b.waitFor("nothing left waiting for the lead", `(() => { const m = document.querySelector("#messages .msg.home");
		return m !== null && m.textContent.includes("Nothing waits for your vote.") && !m.querySelector('[data-action="hp_approve"]'); })()`, long)

	b.become("engineer")
	openHome()
	b.waitFor("the engineer's training job running", inText("#messages .msg.home", "Job llama-finetune running", "Running now (1)"), long)
	b.screenshot("home-engineer-running")
	b.waitFor("the engineer's training job done", inText("#messages .msg.home", "Job llama-finetune completed", "Nothing you may see is running."), runTime+long)
	b.screenshot("home-engineer-done")

	b.become("bystander")
	openHome()
	b.waitFor("the bystander's Home", inText("#messages .msg.home", "Nothing waits for your vote.", "You have asked for nothing lately."), long)
	b.run("the bystander sees nothing of it", 5*time.Second, chromedp.Evaluate[chromedp.Void](`(() => {
		if (document.querySelector("#messages .msg.home").textContent.includes("llama-finetune")) throw new Error("the bystander's Home shows the request");
	})()`))
	b.screenshot("home-bystander")
}
