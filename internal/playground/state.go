package playground

import (
	"bytes"
	"encoding/json"
	"net/url"
	"path"
	"sort"
	"strings"

	"github.com/hyperops/hyperops/internal/fakeslack"
)

// View is what the page shows one persona: the conversations it sees, rendered, what only it sees, its open
// modals, and the world.
type View struct {
	As       Persona       `json:"as"`
	Personas []Persona     `json:"personas"`
	Channels []ChannelView `json:"channels"`
	Modals   []ModalView   `json:"modals"`
	// Home is the persona's App Home tab as the bot last published it (views.publish); nil before any.
	Home      *HomeView         `json:"home,omitempty"`
	World     World             `json:"world"`
	Command   string            `json:"command"`
	Steps     []Step            `json:"steps"`
	AgentSeed string            `json:"agentSeed"`
	Fakes     map[string]string `json:"fakes"`
}

// ChannelView is one conversation as the persona sees it.
type ChannelView struct {
	ID       string        `json:"id"`
	Name     string        `json:"name"`
	Topic    string        `json:"topic"`
	DM       bool          `json:"dm"`
	Member   bool          `json:"member"`
	Messages []MessageView `json:"messages"`
}

// MessageView is a message (or an ephemeral) rendered for the page.
type MessageView struct {
	TS        string     `json:"ts"`
	ThreadTS  string     `json:"threadTs,omitempty"`
	User      string     `json:"user"`
	Name      string     `json:"name"`
	Bot       bool       `json:"bot"`
	HTML      string     `json:"html"`
	Files     []FileView `json:"files,omitempty"`
	Edited    bool       `json:"edited,omitempty"`
	Ephemeral bool       `json:"ephemeral,omitempty"`
	Replies   int        `json:"replies,omitempty"`
	// Metadata is the message's metadata, pretty-printed (the agent's machine-readable reply).
	MetadataType string `json:"metadataType,omitempty"`
	Metadata     string `json:"metadata,omitempty"`
}

// FileView is a file shared in a message.
type FileView struct {
	URL   string `json:"url"`
	Name  string `json:"name"`
	Image bool   `json:"image"`
}

// ModalView is an open modal of the persona.
type ModalView struct {
	ID     string `json:"id"`
	Title  string `json:"title"`
	Submit string `json:"submit"`
	Close  string `json:"close"`
	HTML   string `json:"html"`
}

// HomeView is a persona's App Home tab, rendered.
type HomeView struct {
	HTML string `json:"html"`
	// Publishes counts the views.publish the fake Slack took for the persona.
	Publishes int `json:"publishes"`
}

// Step is one suggested step of the guided start.
type Step struct {
	Title   string `json:"title"`
	Hint    string `json:"hint"`
	As      string `json:"as"`
	Channel string `json:"channel"`
	Text    string `json:"text"`
}

// TrainImage is the image of the guided steps' training job.
const TrainImage = "123456789012.dkr.ecr.us-west-2.amazonaws.com/trainer:v17"

// Steps are the guided start.
var Steps = []Step{
	{Title: "1. Dry-run a training job", As: "engineer", Channel: OpsChannel,
		Hint: "Plans and validates against the cluster (a server-side dry run); nothing changes.",
		Text: "/hp train submit name=llama-finetune image=" + TrainImage + " replicas=2 gpus=8 max-hours=4 dry-run"},
	{Title: "2. Submit it, then approve as a lead", As: "engineer", Channel: OpsChannel,
		Hint: "The plan waits for a lead: switch to Lee Lead and press Approve. The thread follows the Job.",
		Text: "/hp train submit name=llama-finetune image=" + TrainImage + " replicas=2 gpus=8 max-hours=4"},
	{Title: "3. Scale an instance group", As: "engineer", Channel: OpsChannel,
		Hint: "HyperPod UpdateCluster on the fake AWS; approve as a lead and watch new nodes join on the right.",
		Text: "/hp capacity scale group=" + GPUGroup + " count=3"},
}

// AgentSeed is the README's example agent request, as a dry run, for the agent's DM.
const AgentSeed = `{
  "operation": "submit-training-job",
  "target":   {"cluster": "` + Cluster + `", "namespace": "` + Namespace + `"},
  "workload": {"name": "fraud-model-v17", "image": "` + TrainImage + `", "replicas": 4},
  "controls": {"requestId": "train-20250308-001", "dryRun": true, "requiresApproval": true}
}`

// names is how the page shows IDs.
func (p *Playground) names() Names {
	n := Names{Users: map[string]string{BotUser: "HyperOps"}, Channels: map[string]string{}, Groups: map[string]string{Leads: "leads"}}
	for _, ps := range Personas {
		n.Users[ps.ID] = ps.RealName
	}
	for _, c := range Channels {
		n.Channels[c.ID] = c.Name
	}
	return n
}

// view builds the page's state for persona as.
func (p *Playground) view(as Persona, snap fakeslack.Snapshot, world World) View {
	names := p.names()
	files := map[string]fakeslack.File{}
	for _, f := range snap.Files {
		files[f.ID] = f
	}
	v := View{As: as, Personas: Personas, Command: p.Config.Slack.Command, Steps: Steps, AgentSeed: AgentSeed, World: world,
		Fakes: map[string]string{"slack": p.Slack.URL(), "aws": p.AWS.URL()}}
	convs := append([]Channel{}, Channels...)
	convs = append(convs, Channel{ID: as.DM, Name: "HyperOps", Topic: "your direct message with the bot"})
	for _, c := range convs {
		cv := ChannelView{ID: c.ID, Name: c.Name, Topic: c.Topic, DM: strings.HasPrefix(c.ID, "D"), Member: true, Messages: []MessageView{}}
		replies := map[string]int{}
		for _, m := range snap.Messages[c.ID] {
			if m.ThreadTS != "" && m.ThreadTS != m.TS && !m.Deleted {
				replies[m.ThreadTS]++
			}
		}
		for _, m := range snap.Messages[c.ID] {
			if m.Deleted {
				continue
			}
			cv.Messages = append(cv.Messages, messageView(names, m, files, replies[m.TS]))
		}
		for _, e := range snap.Ephemerals {
			if e.Channel == c.ID && e.User == as.ID {
				cv.Messages = append(cv.Messages, MessageView{TS: e.TS, ThreadTS: e.ThreadTS, User: BotUser, Name: "HyperOps",
					Bot: true, Ephemeral: true, HTML: render(names, e.Text, e.Blocks)})
			}
		}
		sort.SliceStable(cv.Messages, func(i, j int) bool { return tsLess(cv.Messages[i].TS, cv.Messages[j].TS) })
		v.Channels = append(v.Channels, cv)
	}
	if h, ok := snap.Homes[as.ID]; ok {
		v.Home = &HomeView{HTML: names.Blocks(h.Blocks), Publishes: h.Publishes}
	}
	for _, vw := range snap.Views {
		if vw.User == as.ID && !vw.Closed {
			v.Modals = append(v.Modals, modalView(names, vw))
		}
	}
	return v
}

func messageView(names Names, m fakeslack.Message, files map[string]fakeslack.File, replies int) MessageView {
	mv := MessageView{TS: m.TS, ThreadTS: m.ThreadTS, User: m.User, Name: names.user(m.User), Bot: m.BotID != "" || m.User == BotUser,
		HTML: render(names, m.Text, m.Blocks), Edited: len(m.Revisions) > 0, Replies: replies}
	if mv.ThreadTS == mv.TS {
		mv.ThreadTS = ""
	}
	for _, id := range m.FileIDs {
		f, ok := files[id]
		if !ok {
			continue
		}
		ext := strings.ToLower(path.Ext(f.Name))
		mv.Files = append(mv.Files, FileView{URL: "/files/" + url.PathEscape(f.ID) + "/" + url.PathEscape(f.Name), Name: f.Name,
			Image: ext == ".png" || ext == ".jpg" || ext == ".jpeg" || ext == ".gif"})
	}
	if m.Metadata != nil && m.Metadata.EventType != "" {
		mv.MetadataType = m.Metadata.EventType
		var pretty bytes.Buffer
		if json.Indent(&pretty, m.Metadata.EventPayload, "", "  ") == nil {
			mv.Metadata = pretty.String()
		} else {
			mv.Metadata = string(m.Metadata.EventPayload)
		}
	}
	return mv
}

// render draws a message: its blocks when it has them (Slack shows text only as the notification), else its text.
func render(names Names, text string, blocks json.RawMessage) string {
	if len(blocks) > 0 && string(blocks) != "null" && string(blocks) != "[]" {
		return names.Blocks(blocks)
	}
	return `<div class="bk-text">` + names.Mrkdwn(text) + `</div>`
}

func modalView(names Names, v fakeslack.View) ModalView {
	var raw struct {
		Submit *textObject `json:"submit"`
		Close  *textObject `json:"close"`
		Title  *textObject `json:"title"`
	}
	_ = json.Unmarshal(v.Raw, &raw)
	mv := ModalView{ID: v.ID, Title: v.Title, Submit: "Submit", Close: "Cancel", HTML: names.Blocks(v.Blocks)}
	if raw.Title != nil && mv.Title == "" {
		mv.Title = raw.Title.Text
	}
	if raw.Submit != nil {
		mv.Submit = raw.Submit.Text
	}
	if raw.Close != nil {
		mv.Close = raw.Close.Text
	}
	return mv
}

// tsLess orders Slack timestamps ("seconds.micros").
func tsLess(a, b string) bool {
	as, af, _ := strings.Cut(a, ".")
	bs, bf, _ := strings.Cut(b, ".")
	if len(as) != len(bs) {
		return len(as) < len(bs)
	}
	if as != bs {
		return as < bs
	}
	return af < bf
}
