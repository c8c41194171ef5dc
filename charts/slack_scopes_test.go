package charts

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/slack-go/slack"
	"gopkg.in/yaml.v3"
)

const slackManifest = "../deploy/slack-app-manifest.yaml"

// methodScopes maps a slack-go client method (without its Context suffix) to the bot scopes its Web API method
// needs for what HyperOps does with it. A method the code calls that is missing here fails the test.
var methodScopes = map[string][]string{
	"AuthTest":                  {},                               // auth.test: no scope
	"PostMessage":               {"chat:write"},                   // chat.postMessage
	"PostEphemeral":             {"chat:write"},                   // chat.postEphemeral
	"UpdateMessage":             {"chat:write"},                   // chat.update
	"DeleteMessage":             {"chat:write"},                   // chat.delete
	"OpenView":                  {},                               // views.open: a trigger id, no scope
	"UpdateView":                {},                               // views.update
	"PublishView":               {},                               // views.publish
	"GetUsersInConversation":    {"channels:read", "groups:read"}, // conversations.members, public and private channels
	"GetConversationInfo":       {"channels:read", "groups:read"}, // conversations.info
	"GetConversationHistory":    {"channels:history", "groups:history"},
	"GetConversationReplies":    {"channels:history", "groups:history", "im:history"},
	"OpenConversation":          {"im:write"}, // conversations.open
	"GetUserGroupMembers":       {"usergroups:read"},
	"GetUserGroups":             {"usergroups:read"},
	"GetUserInfo":               {"users:read"},
	"GetUsersInfo":              {"users:read"},
	"GetUserByEmail":            {"users:read", "users:read.email"},
	"UploadFile":                {"files:write"}, // files.getUploadURLExternal + files.completeUploadExternal
	"AddReaction":               {"reactions:write"},
	"GetPermalink":              {}, // chat.getPermalink
	"ScheduleMessage":           {"chat:write"},
	"JoinConversation":          {"channels:join"},
	"SetAssistantThreadsStatus": {"assistant:write"},
}

// eventSubscriptions maps the slackevents types the code handles to the bot event and the scope it needs. The bot
// handles message events in DMs only (channel type "im").
var eventSubscriptions = map[string]struct{ Event, Scope string }{
	"MessageEvent":       {"message.im", "im:history"},
	"AppMentionEvent":    {"app_mention", "app_mentions:read"},
	"AppHomeOpenedEvent": {"app_home_opened", ""},
}

// appManifest is the part of a Slack app manifest HyperOps relies on.
type appManifest struct {
	Features struct {
		AppHome struct {
			HomeTabEnabled             bool `yaml:"home_tab_enabled"`
			MessagesTabEnabled         bool `yaml:"messages_tab_enabled"`
			MessagesTabReadOnlyEnabled bool `yaml:"messages_tab_read_only_enabled"`
		} `yaml:"app_home"`
		BotUser struct {
			DisplayName string `yaml:"display_name"`
		} `yaml:"bot_user"`
		SlashCommands []struct {
			Command     string `yaml:"command"`
			Description string `yaml:"description"`
			UsageHint   string `yaml:"usage_hint"`
			URL         string `yaml:"url"`
		} `yaml:"slash_commands"`
	} `yaml:"features"`
	OAuthConfig struct {
		Scopes struct {
			Bot  []string `yaml:"bot"`
			User []string `yaml:"user"`
		} `yaml:"scopes"`
	} `yaml:"oauth_config"`
	Settings struct {
		EventSubscriptions struct {
			RequestURL string   `yaml:"request_url"`
			BotEvents  []string `yaml:"bot_events"`
			UserEvents []string `yaml:"user_events"`
		} `yaml:"event_subscriptions"`
		Interactivity struct {
			IsEnabled  bool   `yaml:"is_enabled"`
			RequestURL string `yaml:"request_url"`
		} `yaml:"interactivity"`
		SocketModeEnabled bool `yaml:"socket_mode_enabled"`
	} `yaml:"settings"`
}

// slackUse is what the Go source does with Slack: Web API methods called, event types handled, whether it serves
// slash commands and interactions.
type slackUse struct {
	Methods      []string
	Events       []string
	Slash        bool
	Interactions bool
}

// slackClientMethods are the method names of *slack.Client, without the Context suffix, except the logging ones.
func slackClientMethods() map[string]bool {
	out := map[string]bool{}
	t := reflect.TypeOf(&slack.Client{})
	for i := 0; i < t.NumMethod(); i++ {
		name := strings.TrimSuffix(t.Method(i).Name, "Context")
		switch name {
		case "Debug", "Debugf", "Debugln":
			continue
		}
		out[name] = true
	}
	return out
}

// scanSlackUse parses the non-test Go files under roots for slack-go client calls and Socket Mode event handling.
func scanSlackUse(roots []string) (slackUse, error) {
	methods := slackClientMethods()
	seen := map[string]bool{}
	events := map[string]bool{}
	var use slackUse
	fset := token.NewFileSet()
	for _, root := range roots {
		err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && (d.Name() == "testdata" || d.Name() == "vendor") {
				return filepath.SkipDir
			}
			if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return nil
			}
			f, err := parser.ParseFile(fset, path, nil, 0)
			if err != nil {
				return fmt.Errorf("parse %s: %w", path, err)
			}
			ast.Inspect(f, func(n ast.Node) bool {
				sel, ok := n.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				pkg, _ := sel.X.(*ast.Ident)
				switch {
				case pkg != nil && pkg.Name == "slackevents":
					if _, ok := eventSubscriptions[sel.Sel.Name]; ok {
						events[sel.Sel.Name] = true
					}
				case pkg != nil && pkg.Name == "socketmode" && sel.Sel.Name == "EventTypeSlashCommand":
					use.Slash = true
				case pkg != nil && pkg.Name == "socketmode" && sel.Sel.Name == "EventTypeInteractive":
					use.Interactions = true
				case pkg == nil || pkg.Name != "slack":
					if name := strings.TrimSuffix(sel.Sel.Name, "Context"); methods[name] && isCall(f, sel) {
						seen[name] = true
					}
				}
				return true
			})
			return nil
		})
		if err != nil {
			return use, err
		}
	}
	for m := range seen {
		use.Methods = append(use.Methods, m)
	}
	for e := range events {
		use.Events = append(use.Events, e)
	}
	sort.Strings(use.Methods)
	sort.Strings(use.Events)
	return use, nil
}

// isCall reports whether sel is the function of a call somewhere in f (x.PostMessageContext(…), not a field).
func isCall(f *ast.File, sel *ast.SelectorExpr) bool {
	found := false
	ast.Inspect(f, func(n ast.Node) bool {
		if c, ok := n.(*ast.CallExpr); ok && c.Fun == sel {
			found = true
		}
		return !found
	})
	return found
}

// checkManifest compares a manifest with what the code uses and returns every problem.
func checkManifest(m appManifest, use slackUse, command string) []string {
	var problems []string
	need := map[string][]string{} // scope → why
	for _, meth := range use.Methods {
		scopes, ok := methodScopes[meth]
		if !ok {
			problems = append(problems, fmt.Sprintf("the code calls slack %s, which is not in methodScopes: add its scopes", meth))
		}
		for _, s := range scopes {
			need[s] = append(need[s], meth)
		}
	}
	var wantEvents []string
	for _, e := range use.Events {
		sub := eventSubscriptions[e]
		wantEvents = append(wantEvents, sub.Event)
		if sub.Scope != "" {
			need[sub.Scope] = append(need[sub.Scope], "event "+sub.Event)
		}
	}
	if use.Slash {
		need["commands"] = append(need["commands"], "slash commands")
	}
	have := m.OAuthConfig.Scopes.Bot
	for s, why := range need {
		if !slices.Contains(have, s) {
			problems = append(problems, fmt.Sprintf("bot scope %s is missing: needed by %s", s, strings.Join(why, ", ")))
		}
	}
	for _, s := range have {
		if need[s] == nil {
			problems = append(problems, fmt.Sprintf("bot scope %s is not used by any call, event or command: remove it", s))
		}
	}
	if len(m.OAuthConfig.Scopes.User) > 0 {
		problems = append(problems, fmt.Sprintf("user scopes %v: HyperOps acts only as its bot", m.OAuthConfig.Scopes.User))
	}
	sort.Strings(wantEvents)
	got := slices.Sorted(slices.Values(m.Settings.EventSubscriptions.BotEvents))
	if !slices.Equal(got, wantEvents) {
		problems = append(problems, fmt.Sprintf("bot events %v, want %v (the events the code handles)", got, wantEvents))
	}
	if !m.Settings.SocketModeEnabled {
		problems = append(problems, "socket_mode_enabled must be true: HyperOps connects out over Socket Mode")
	}
	if m.Settings.Interactivity.IsEnabled != use.Interactions {
		problems = append(problems, fmt.Sprintf("interactivity is_enabled = %v, the code handles interactions: %v",
			m.Settings.Interactivity.IsEnabled, use.Interactions))
	}
	if slices.Contains(use.Events, "MessageEvent") && !m.Features.AppHome.MessagesTabEnabled {
		problems = append(problems, "app_home.messages_tab_enabled must be true: agents DM the bot")
	}
	if slices.Contains(use.Events, "AppHomeOpenedEvent") != m.Features.AppHome.HomeTabEnabled {
		problems = append(problems, fmt.Sprintf("app_home.home_tab_enabled = %v, the code publishes a Home tab on app_home_opened: %v",
			m.Features.AppHome.HomeTabEnabled, slices.Contains(use.Events, "AppHomeOpenedEvent")))
	}
	problems = append(problems, checkSlashCommand(m, use, command)...)
	sort.Strings(problems)
	return problems
}

func checkSlashCommand(m appManifest, use slackUse, command string) []string {
	cmds := m.Features.SlashCommands
	switch {
	case !use.Slash && len(cmds) == 0:
		return nil
	case len(cmds) != 1 || cmds[0].Command != command:
		return []string{fmt.Sprintf("slash commands %+v, want exactly %s", cmds, command)}
	case cmds[0].UsageHint == "" || cmds[0].Description == "":
		return []string{"the slash command needs a description and a usage hint"}
	case cmds[0].URL != "" || m.Settings.Interactivity.RequestURL != "" || m.Settings.EventSubscriptions.RequestURL != "":
		return []string{"request URLs are set: with Socket Mode Slack must not call HyperOps over HTTP"}
	}
	return nil
}

func readManifest(t *testing.T) appManifest {
	t.Helper()
	raw, err := os.ReadFile(slackManifest)
	if err != nil {
		t.Fatal(err)
	}
	var m appManifest
	dec := yaml.NewDecoder(strings.NewReader(string(raw)))
	dec.KnownFields(false)
	if err := dec.Decode(&m); err != nil {
		t.Fatalf("%s: %v", slackManifest, err)
	}
	return m
}

// TestSlackManifestMatchesCode scans bot/ and handlers/ for the Slack Web API methods they call and the events they
// handle, and checks the app manifest asks for exactly the scopes those need.
func TestSlackManifestMatchesCode(t *testing.T) {
	use, err := scanSlackUse(repoPaths("bot", "handlers"))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the code calls %v, handles %v, slash commands %v, interactions %v", use.Methods, use.Events, use.Slash, use.Interactions)
	if len(use.Methods) == 0 || !use.Slash {
		t.Fatalf("found no Slack calls or slash command handling in bot/ and handlers/: the scanner is broken")
	}
	for _, p := range checkManifest(readManifest(t), use, "/hp") {
		t.Error(p)
	}
}

// TestCheckManifest shows the check fails the ways it should, on a manifest built in the test.
func TestCheckManifest(t *testing.T) {
	good := func() appManifest {
		var m appManifest
		m.OAuthConfig.Scopes.Bot = []string{"chat:write", "commands", "im:history", "usergroups:read"}
		m.Settings.EventSubscriptions.BotEvents = []string{"message.im"}
		m.Settings.SocketModeEnabled = true
		m.Settings.Interactivity.IsEnabled = true
		m.Features.AppHome.MessagesTabEnabled = true
		m.Features.SlashCommands = append(m.Features.SlashCommands, struct {
			Command     string `yaml:"command"`
			Description string `yaml:"description"`
			UsageHint   string `yaml:"usage_hint"`
			URL         string `yaml:"url"`
		}{Command: "/hp", Description: "HyperOps", UsageHint: "status"})
		return m
	}
	baseUse := slackUse{Methods: []string{"PostMessage", "UpdateMessage", "GetUserGroupMembers"}, Events: []string{"MessageEvent"},
		Slash: true, Interactions: true}
	cases := []struct {
		name string
		edit func(*appManifest, *slackUse)
		want string
	}{
		{"consistent", func(*appManifest, *slackUse) {}, ""},
		{"scope of a new call missing", func(_ *appManifest, u *slackUse) { u.Methods = append(u.Methods, "GetUserInfo") },
			"bot scope users:read is missing: needed by GetUserInfo"},
		{"unused scope", func(m *appManifest, _ *slackUse) {
			m.OAuthConfig.Scopes.Bot = append(m.OAuthConfig.Scopes.Bot, "channels:history")
		}, "bot scope channels:history is not used"},
		{"call not in the table", func(_ *appManifest, u *slackUse) { u.Methods = append(u.Methods, "InviteGuest") },
			"calls slack InviteGuest, which is not in methodScopes"},
		{"event not subscribed", func(m *appManifest, _ *slackUse) { m.Settings.EventSubscriptions.BotEvents = nil },
			"bot events [], want [message.im]"},
		{"socket mode off", func(m *appManifest, _ *slackUse) { m.Settings.SocketModeEnabled = false }, "socket_mode_enabled"},
		{"interactivity off", func(m *appManifest, _ *slackUse) { m.Settings.Interactivity.IsEnabled = false }, "interactivity"},
		{"no usage hint", func(m *appManifest, _ *slackUse) { m.Features.SlashCommands[0].UsageHint = "" }, "usage hint"},
		{"user scope", func(m *appManifest, _ *slackUse) { m.OAuthConfig.Scopes.User = []string{"chat:write"} }, "user scopes"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m, u := good(), baseUse
			u.Methods = slices.Clone(u.Methods)
			tc.edit(&m, &u)
			problems := checkManifest(m, u, "/hp")
			if tc.want == "" {
				if len(problems) > 0 {
					t.Fatalf("problems %v, want none", problems)
				}
				return
			}
			if !slices.ContainsFunc(problems, func(p string) bool { return strings.Contains(p, tc.want) }) {
				t.Fatalf("problems %v, want one containing %q", problems, tc.want)
			}
		})
	}
}
