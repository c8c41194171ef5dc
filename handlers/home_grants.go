package handlers

import (
	"context"
	"time"

	"github.com/slack-go/slack"

	"github.com/hyperops/hyperops/ops"
)

// grantsHome is the App Home's section of the viewer's standing grants: what `/hp grants` lists (those they gave,
// that approve their requests, or that they may revoke), each with its Revoke button. A Revoke clicked there
// answers at the top of the clicker's Home, which is drawn again without the grant.
type grantsHome struct{ g GrantEngine }

// HomeTitle implements HomeSection.
func (grantsHome) HomeTitle() string { return GrantBadge + " Your grants" }

// HomeBlocks implements HomeSection: nothing when the viewer has no live grant (the Home says "none").
func (s grantsHome) HomeBlocks(ctx context.Context, viewer ops.Initiator) ([]slack.Block, error) {
	list, err := s.g.VisibleGrants(ctx, viewer)
	if err != nil || len(list) == 0 {
		return nil, err
	}
	return GrantsMessage(list, viewer, time.Now()).Blocks[1:], nil // the Home draws its own header
}
