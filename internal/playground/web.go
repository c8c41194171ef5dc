package playground

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"mime"
	"net"
	"net/http"
	"path"
	"strings"
	"time"

	"github.com/hyperops/hyperops/internal/fakeslack"
)

//go:embed static
var static embed.FS

// serve starts the page on the loopback listener and the world's poller.
func (p *Playground) serve() error {
	ln := p.opts.Listener
	p.web = &http.Server{Handler: p.Handler(), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = p.web.Serve(ln) }()
	p.hub.loop(p.pollWorld)
	return nil
}

// pollWorld publishes whenever the side panel's world changes; the Kubernetes API and the fake AWS are read once
// a second (the page's own reload is driven by the event stream).
func (p *Playground) pollWorld(ctx context.Context) {
	var last []byte
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		w := p.world(ctx)
		raw, _ := json.Marshal(w)
		if string(raw) != string(last) {
			p.worldMu.Lock()
			p.lastWorld = w
			p.worldMu.Unlock()
			last = raw
			p.hub.publish()
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (p *Playground) currentWorld() World {
	p.worldMu.Lock()
	defer p.worldMu.Unlock()
	return p.lastWorld
}

// Handler serves the page, its assets, the state API and the event stream.
func (p *Playground) Handler() http.Handler {
	mux := http.NewServeMux()
	assets, _ := fs.Sub(static, "static")
	mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(assets)))
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		page, _ := fs.ReadFile(assets, "index.html")
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write(page)
	})
	mux.HandleFunc("GET /api/state", p.serveState)
	mux.HandleFunc("GET /api/events", p.serveEvents)
	mux.HandleFunc("GET /files/{id}/{name}", p.serveFile)
	mux.HandleFunc("POST /api/send", jsonAction(p.send))
	mux.HandleFunc("POST /api/click", jsonAction(p.click))
	mux.HandleFunc("POST /api/overflow", jsonAction(p.choose))
	mux.HandleFunc("POST /api/view", jsonAction(p.submitView))
	mux.HandleFunc("POST /api/world", jsonAction(p.act))
	mux.HandleFunc("POST /api/home", jsonAction(p.openHome))
	mux.HandleFunc("POST /api/homeclick", jsonAction(p.homeClick))
	return guard(mux)
}

// guard answers only requests addressed to the loopback host (no DNS rebinding) and sets a strict content policy:
// the page loads nothing from anywhere else.
func guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host := r.Host
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		if host != "127.0.0.1" && host != "localhost" && host != "::1" {
			http.Error(w, "the playground answers on 127.0.0.1 only", http.StatusForbidden)
			return
		}
		w.Header().Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; connect-src 'self'; frame-ancestors 'none'")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Cache-Control", "no-store")
		next.ServeHTTP(w, r)
	})
}

// request is what the page posts; each action reads the fields it needs.
type request struct {
	As       string                       `json:"as"`
	Channel  string                       `json:"channel"`
	ThreadTS string                       `json:"threadTs"`
	TS       string                       `json:"ts"`
	Text     string                       `json:"text"`
	Action   string                       `json:"action"`
	Block    string                       `json:"block"`
	Value    string                       `json:"value"`
	ViewID   string                       `json:"viewId"`
	Values   map[string]map[string]string `json:"values"`
	Kind     string                       `json:"kind"`
	Name     string                       `json:"name"`
	NS       string                       `json:"namespace"`
}

// answer is what an action returns to the page: ok, or an error a person can read; a modal's field errors.
type answer struct {
	OK     bool              `json:"ok"`
	Error  string            `json:"error,omitempty"`
	Errors map[string]string `json:"errors,omitempty"`
}

// jsonAction decodes a JSON body (only JSON: a form on another site cannot post here) and runs f.
func jsonAction(f func(context.Context, request) answer) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/json" {
			http.Error(w, "send application/json", http.StatusUnsupportedMediaType)
			return
		}
		var req request
		dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil {
			writeAnswer(w, http.StatusBadRequest, answer{Error: "bad request: " + err.Error()})
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
		defer cancel()
		a := f(ctx, req)
		status := http.StatusOK
		if !a.OK && a.Errors == nil {
			status = http.StatusUnprocessableEntity
		}
		writeAnswer(w, status, a)
	}
}

func writeAnswer(w http.ResponseWriter, status int, a answer) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(a)
}

func failed(err error) answer { return answer{Error: err.Error()} }

func (p *Playground) persona(key string) (Persona, error) {
	ps, ok := PersonaByKey(key)
	if !ok {
		return ps, fmt.Errorf("unknown persona %q", key)
	}
	return ps, nil
}

func (p *Playground) serveState(w http.ResponseWriter, r *http.Request) {
	as, err := p.persona(r.URL.Query().Get("as"))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	v := p.view(as, p.Slack.Snapshot(), p.currentWorld())
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// serveEvents is a server-sent event stream: one "change" event after each change (coalesced), so the page
// reloads its state; a comment every 15s keeps it open.
func (p *Playground) serveEvents(w http.ResponseWriter, r *http.Request) {
	fl, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	ch, cancel := p.hub.subscribe()
	defer cancel()
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	_, _ = fmt.Fprint(w, "event: change\ndata: hello\n\n")
	fl.Flush()
	keep := time.NewTicker(15 * time.Second)
	defer keep.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-p.hub.done():
			return
		case <-keep.C:
			_, _ = fmt.Fprint(w, ": keep-alive\n\n")
		case <-ch:
			_, _ = fmt.Fprint(w, "event: change\ndata: x\n\n")
		}
		fl.Flush()
	}
}

func (p *Playground) serveFile(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	for _, f := range p.Slack.Files() {
		if f.ID == id {
			ct := mime.TypeByExtension(path.Ext(f.Name))
			if ct == "" || !strings.HasPrefix(ct, "image/") {
				ct = "text/plain; charset=utf-8"
			}
			w.Header().Set("Content-Type", ct)
			_, _ = w.Write(f.Content)
			return
		}
	}
	http.NotFound(w, r)
}

// send is the composer: "/hp …" is a slash command in the channel, anything else a message (in a DM the bot
// gets it as a message.im event, as an agent's JSON request).
func (p *Playground) send(ctx context.Context, req request) answer {
	as, err := p.persona(req.As)
	if err != nil {
		return failed(err)
	}
	text := strings.TrimSpace(req.Text)
	if text == "" {
		return answer{Error: "type something first"}
	}
	if !p.canPost(as, req.Channel) {
		return answer{Error: as.RealName + " is not in that conversation"}
	}
	cmd := p.Config.Slack.Command
	if text == cmd || strings.HasPrefix(text, cmd+" ") {
		d, err := p.Slack.SlashCommand(ctx, fakeslack.SlashCommand{Command: cmd, Text: strings.TrimSpace(strings.TrimPrefix(text, cmd)),
			User: as.ID, Channel: req.Channel})
		if err != nil {
			return failed(fmt.Errorf("deliver the slash command: %w", err))
		}
		if _, err := d.Ack(ctx); err != nil {
			return failed(fmt.Errorf("the bot did not acknowledge the command: %w", err))
		}
		return answer{OK: true}
	}
	if strings.HasPrefix(text, "/") {
		name, _, _ := strings.Cut(text, " ")
		return answer{Error: name + " is not a command here; HyperOps answers " + cmd}
	}
	_, d, err := p.Slack.PostMessage(ctx, fakeslack.Post{Channel: req.Channel, User: as.ID, Text: text, ThreadTS: req.ThreadTS})
	if err != nil {
		return failed(fmt.Errorf("post the message: %w", err))
	}
	if d.EnvelopeID != "" {
		if _, err := d.Ack(ctx); err != nil {
			return failed(fmt.Errorf("the bot did not acknowledge the message: %w", err))
		}
	}
	return answer{OK: true}
}

// canPost reports whether the persona is in the conversation: its own DM, or (a person) a shared channel.
func (p *Playground) canPost(as Persona, channel string) bool {
	if channel == as.DM {
		return true
	}
	if as.IsAgent {
		return false // an agent talks to HyperOps in its DM only
	}
	for _, c := range Channels {
		if c.ID == channel {
			return true
		}
	}
	return false
}

// click presses a button as the persona, through Socket Mode like Slack.
func (p *Playground) click(ctx context.Context, req request) answer {
	as, err := p.persona(req.As)
	if err != nil {
		return failed(err)
	}
	d, err := p.Slack.ClickButton(ctx, fakeslack.Click{User: as.ID, Channel: req.Channel, MessageTS: req.TS, ActionID: req.Action, BlockID: req.Block})
	if errors.Is(err, fakeslack.ErrNotFound) {
		return answer{Error: "that button is gone (the message changed); look at it again"}
	}
	if err != nil {
		return failed(err)
	}
	if _, err := d.Ack(ctx); err != nil {
		return failed(fmt.Errorf("the bot did not acknowledge the click: %w", err))
	}
	return answer{OK: true}
}

// openHome is the persona opening the app's Home tab: app_home_opened over Socket Mode; the bot publishes it.
func (p *Playground) openHome(ctx context.Context, req request) answer {
	as, err := p.persona(req.As)
	if err != nil {
		return failed(err)
	}
	if as.IsAgent {
		return answer{Error: "an agent has no Home tab: it reads its requests over DM or MCP"}
	}
	d, err := p.Slack.OpenHome(ctx, as.ID)
	if err != nil {
		return failed(err)
	}
	if _, err := d.Ack(ctx); err != nil {
		return failed(fmt.Errorf("the bot did not acknowledge app_home_opened: %w", err))
	}
	return answer{OK: true}
}

// homeClick presses a button in the persona's Home tab, as Slack sends a click in a view.
func (p *Playground) homeClick(ctx context.Context, req request) answer {
	as, err := p.persona(req.As)
	if err != nil {
		return failed(err)
	}
	d, err := p.Slack.ClickHome(ctx, fakeslack.HomeClick{User: as.ID, ActionID: req.Action, BlockID: req.Block})
	if errors.Is(err, fakeslack.ErrNotFound) {
		return answer{Error: "that button is gone (the Home changed); look at it again"}
	}
	if err != nil {
		return failed(err)
	}
	if _, err := d.Ack(ctx); err != nil {
		return failed(fmt.Errorf("the bot did not acknowledge the click: %w", err))
	}
	return answer{OK: true}
}

// choose picks an overflow menu option as the persona.
func (p *Playground) choose(ctx context.Context, req request) answer {
	as, err := p.persona(req.As)
	if err != nil {
		return failed(err)
	}
	d, err := p.Slack.ChooseOverflow(ctx, fakeslack.Choice{User: as.ID, Channel: req.Channel, MessageTS: req.TS, ActionID: req.Action,
		BlockID: req.Block, Value: req.Value})
	if err != nil {
		return failed(err)
	}
	if _, err := d.Ack(ctx); err != nil {
		return failed(fmt.Errorf("the bot did not acknowledge the choice: %w", err))
	}
	return answer{OK: true}
}

// submitView submits a modal; errors the bot puts in its ack (response_action: errors) go back to the modal.
func (p *Playground) submitView(ctx context.Context, req request) answer {
	as, err := p.persona(req.As)
	if err != nil {
		return failed(err)
	}
	values := map[string]map[string]any{}
	for b, acts := range req.Values {
		values[b] = map[string]any{}
		for a, v := range acts {
			values[b][a] = fakeslack.TextValue(v)
		}
	}
	d, err := p.Slack.SubmitView(ctx, fakeslack.Submission{ViewID: req.ViewID, User: as.ID, Values: values})
	if err != nil {
		return failed(err)
	}
	ack, err := d.Ack(ctx)
	if err != nil {
		return failed(fmt.Errorf("the bot did not acknowledge the submission: %w", err))
	}
	var resp struct {
		ResponseAction string            `json:"response_action"`
		Errors         map[string]string `json:"errors"`
	}
	if len(ack.Payload) > 0 && json.Unmarshal(ack.Payload, &resp) == nil && resp.ResponseAction == "errors" {
		return answer{Errors: resp.Errors}
	}
	return answer{OK: true}
}

// act changes the simulated world from the side panel.
func (p *Playground) act(ctx context.Context, req request) answer {
	var err error
	switch req.Kind {
	case "fail-workload":
		err = p.failWorkload(ctx, req.NS, req.Name)
	case "node-unhealthy":
		err = p.setNodeHealth(ctx, req.Name, false)
	case "node-healthy":
		err = p.setNodeHealth(ctx, req.Name, true)
	case "throttle-on":
		p.throttle(true)
	case "throttle-off":
		p.throttle(false)
	default:
		err = fmt.Errorf("unknown world action %q", req.Kind)
	}
	if err != nil {
		return failed(err)
	}
	p.refreshWorld(ctx)
	return answer{OK: true}
}

// refreshWorld reads the world now, so the panel shows an action's effect without waiting for the next poll.
func (p *Playground) refreshWorld(ctx context.Context) {
	w := p.world(ctx)
	p.worldMu.Lock()
	p.lastWorld = w
	p.worldMu.Unlock()
	p.hub.publish()
}
