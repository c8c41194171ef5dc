package handlers

import (
	"context"
	"fmt"

	"github.com/hyperops/hyperops/ops"
)

// UploadFinder finds a file the bot shared, by its name: in the thread threadTS of channel, or among the channel's
// latest top-level messages when threadTS is empty. The bot's Slack client implements it with
// conversations.replies / conversations.history, whose messages list the files they share.
type UploadFinder interface {
	FindUploaded(ctx context.Context, channel, threadTS, name string) (found bool, err error)
}

// filesPart is the told counter of an entry's uploads as a whole: an entry whose uploads were started but not all
// done (a lost answer, then a retry that found the plan or the reply already posted) finishes them.
const filesPart = "files"

// uploadFiles uploads the files of entry i, each once, like the parts deliver posts: not again once recorded, and
// after an attempt whose answer was lost only if it is not found in the conversation by its name. A file Slack
// refuses for good is recorded as undelivered; any other error is transient and the entry is retried.
func (tl *Teller) uploadFiles(ctx context.Context, rec *ops.Record, i int, channel, thread string, files []File) error {
	if len(files) == 0 {
		return nil
	}
	id := rec.ID()
	if err := tl.h.refs.SetTold(ctx, id, filesPart+"/try", i+1); err != nil {
		return fmt.Errorf("record an upload attempt for %s: %w", id, err)
	}
	for _, f := range files {
		if err := tl.uploadOnce(ctx, rec, i, channel, thread, f); err != nil {
			return err
		}
	}
	return tl.posted(ctx, id, i, filesPart)
}

// finishUploads completes the uploads entry i started, if an earlier attempt left some undone.
func (tl *Teller) finishUploads(ctx context.Context, rec *ops.Record, i int, plan MessageRef) error {
	h := tl.h
	tried, _, err := h.refs.Told(ctx, rec.ID(), filesPart+"/try")
	if err != nil || tried <= i {
		return err
	}
	if done, _, err := h.refs.Told(ctx, rec.ID(), filesPart); err != nil || done > i {
		return err
	}
	// Only the files this entry tried: the plan's, uploaded with an earlier entry, are not this entry's to send.
	var started []File
	for _, f := range PlanMessage(h.catalog, rec).Files {
		n, _, err := h.refs.Told(ctx, rec.ID(), "file:"+f.Name+"/try")
		if err != nil {
			return fmt.Errorf("read what was tried of %s: %w", rec.ID(), err)
		}
		if n > i {
			started = append(started, f)
		}
	}
	return tl.uploadFiles(ctx, rec, i, plan.Channel, plan.TS, started)
}

// uploadOnce uploads one file of entry i unless it was uploaded, or is found after an attempt whose answer was lost.
func (tl *Teller) uploadOnce(ctx context.Context, rec *ops.Record, i int, channel, thread string, f File) error {
	h := tl.h
	id, name := rec.ID(), "file:"+f.Name
	if n, _, err := h.refs.Told(ctx, id, name); err != nil {
		return fmt.Errorf("read what was uploaded of %s: %w", id, err)
	} else if n > i {
		return nil
	}
	tried, _, err := h.refs.Told(ctx, id, name+"/try")
	if err != nil {
		return fmt.Errorf("read what was tried of %s: %w", id, err)
	}
	if tried > i && h.uploads != nil {
		found, err := h.uploads.FindUploaded(ctx, channel, thread, f.Name)
		if err != nil && Classify(err) == Transient {
			return fmt.Errorf("look for %s of %s in Slack: %w", f.Name, id, err)
		}
		if found {
			return tl.posted(ctx, id, i, name)
		}
	} else if err := h.refs.SetTold(ctx, id, name+"/try", i+1); err != nil {
		return fmt.Errorf("record an upload attempt for %s: %w", id, err)
	}
	f.Channel, f.ThreadTS = channel, thread
	err = h.poster.Upload(ctx, f)
	if err != nil && Classify(err) == Transient {
		return fmt.Errorf("upload %s of %s: %w", f.Name, id, err)
	}
	if err != nil {
		tl.undelivered(Undelivered{RequestID: id, Entry: i, Part: "file", Channel: channel, Method: "files.completeUploadExternal",
			Code: SlackCode(err), Err: err})
	}
	return tl.posted(ctx, id, i, name)
}
