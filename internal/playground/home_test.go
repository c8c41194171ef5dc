package playground

import (
	"context"
	"strings"
	"testing"

	"github.com/slack-go/slack"

	"github.com/hyperops/hyperops/config"
	"github.com/hyperops/hyperops/internal/fakeaws"
	"github.com/hyperops/hyperops/internal/fakeslack"
)

// TestHomeTabIsDrawnFromWhatWasPublished: the page's Home for a persona is what views.publish last gave the fake
// Slack for them, drawn with working buttons; a persona with no Home published gets none.
func TestHomeTabIsDrawnFromWhatWasPublished(t *testing.T) {
	var users []fakeslack.User
	for _, ps := range Personas {
		users = append(users, fakeslack.User{ID: ps.ID, Name: ps.Name, IsBot: ps.IsAgent})
	}
	srv := fakeslack.New(fakeslack.Options{BotToken: "xoxb-fake", Users: users})
	t.Cleanup(srv.Close)
	aws := fakeaws.New(fakeaws.Options{})
	t.Cleanup(aws.Close)
	p := &Playground{Slack: srv, AWS: aws, Config: &config.Config{}}
	lead, _ := PersonaByKey("lead1")
	bystander, _ := PersonaByKey("bystander")
	approve := slack.NewButtonBlockElement("hp_approve", "req-1@abc", slack.NewTextBlockObject(slack.PlainTextType, "Approve", false, false))
	approve.Style = slack.StylePrimary
	view := slack.HomeTabViewRequest{Type: slack.VTHomeTab, Blocks: slack.Blocks{BlockSet: []slack.Block{
		slack.NewSectionBlock(slack.NewTextBlockObject(slack.MarkdownType, "*Waiting for you (1)* <!channel>", false, false), nil, nil),
		slack.NewActionBlock("home:waiting:req-1", approve),
	}}}
	api := slack.New("xoxb-fake", slack.OptionAPIURL(srv.APIURL()))
	if _, err := api.PublishViewContext(context.Background(), slack.PublishViewContextRequest{UserID: lead.ID, View: view}); err != nil {
		t.Fatal(err)
	}
	v := p.view(lead, srv.Snapshot(), World{})
	if v.Home == nil || v.Home.Publishes != 1 {
		t.Fatalf("the lead's Home: %+v", v.Home)
	}
	for _, want := range []string{"Waiting for you (1)", `data-kind="button" data-action="hp_approve" data-block="home:waiting:req-1"`} {
		if !strings.Contains(v.Home.HTML, want) {
			t.Errorf("the lead's Home lacks %s:\n%s", want, v.Home.HTML)
		}
	}
	if strings.Contains(v.Home.HTML, "<!channel>") {
		t.Errorf("the Home draws a live ping: %s", v.Home.HTML)
	}
	if v := p.view(bystander, srv.Snapshot(), World{}); v.Home != nil {
		t.Errorf("the bystander got a Home nobody published: %+v", v.Home)
	}
}
