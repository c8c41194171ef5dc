package fakeslack

import (
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"strconv"
	"strings"
)

// fileRecord is a file in the upload v2 flow: URL issued, bytes uploaded, then completed.
type fileRecord struct {
	File
	uploadKey string
	uploaded  bool
}

func (s *Server) filesGetUploadURLExternal(c *call) (map[string]any, *apiError) {
	name := c.p.get("filename")
	length, err := strconv.Atoi(c.p.get("length"))
	if name == "" || err != nil || length < 1 {
		return nil, errCode("invalid_arguments")
	}
	f := &fileRecord{File: File{ID: randomID("F", 10), Name: name, User: c.id.user, DeclaredLength: length}, uploadKey: randomHex(24)}
	s.files[f.ID] = f
	s.fileOrder = append(s.fileOrder, f.ID)
	s.notifyLocked()
	return map[string]any{"upload_url": s.http.URL + "/upload/v1/" + f.uploadKey, "file_id": f.ID}, nil
}

// serveUpload takes the file bytes, as a multipart form (field "file") or a raw body, like files.slack.com.
func (s *Server) serveUpload(w http.ResponseWriter, r *http.Request) {
	key := strings.TrimPrefix(r.URL.Path, "/upload/v1/")
	if r.Method != http.MethodPost {
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	data, err := readUpload(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var f *fileRecord
	for _, rec := range s.files {
		if rec.uploadKey == key && !rec.Completed {
			f = rec
		}
	}
	if f == nil {
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	f.Content, f.uploaded = data, true
	s.notifyLocked()
	w.Header().Set("Content-Type", "text/plain")
	_, _ = fmt.Fprintf(w, "OK - %d", len(data))
}

func readUpload(r *http.Request) ([]byte, error) {
	body := io.LimitReader(r.Body, 1<<30)
	mt, ps, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || !strings.HasPrefix(mt, "multipart/") {
		return io.ReadAll(body)
	}
	mr := multipart.NewReader(body, ps["boundary"])
	for {
		part, err := mr.NextPart()
		if err != nil {
			return nil, fmt.Errorf("reading multipart upload: no file part: %w", err)
		}
		if part.FormName() == "file" || part.FileName() != "" {
			data, err := io.ReadAll(part)
			if err != nil {
				return nil, fmt.Errorf("reading file part: %w", err)
			}
			return data, nil
		}
	}
}

func (s *Server) filesCompleteUploadExternal(c *call) (map[string]any, *apiError) {
	var summaries []struct {
		ID    string `json:"id"`
		Title string `json:"title"`
	}
	if err := json.Unmarshal([]byte(c.p.get("files")), &summaries); err != nil || len(summaries) == 0 {
		return nil, errCode("invalid_arguments")
	}
	var targets []*channel
	ids := c.p.get("channels")
	if cid := c.p.get("channel_id"); cid != "" {
		ids = cid
	}
	for _, id := range strings.Split(ids, ",") {
		if id = strings.TrimSpace(id); id == "" {
			continue
		}
		ch, aerr := s.postableLocked(id, c.id.user)
		if aerr != nil {
			return nil, aerr
		}
		targets = append(targets, ch)
	}
	threadTS := c.p.get("thread_ts")
	if threadTS != "" && len(targets) != 1 {
		return nil, errCode("invalid_arguments")
	}
	recs := make([]*fileRecord, 0, len(summaries))
	for _, sm := range summaries {
		f := s.files[sm.ID]
		if f == nil || !f.uploaded || f.Completed || f.User != c.id.user {
			return nil, errCode("file_not_found")
		}
		recs = append(recs, f)
	}
	ct := content{text: c.p.get("initial_comment"), hasText: true}
	if raw := c.p.get("blocks"); raw != "" && ct.text == "" {
		if code, problems := validateBlocks(raw, surfaceMessage, "/blocks"); code != "" {
			return nil, errCode(code, problems...)
		}
		ct.blocks = json.RawMessage(raw)
	}
	for i, f := range recs {
		f.Completed = true
		f.Title = summaries[i].Title
		if f.Title == "" {
			f.Title = f.Name
		}
	}
	for _, ch := range targets {
		m := s.addFileMessageLocked(ch, c.id, ct, threadTS, recs)
		for _, f := range recs {
			f.Channels = append(f.Channels, ch.id)
			f.ThreadTS, f.MessageTS = m.ThreadTS, m.TS
		}
	}
	s.notifyLocked()
	out := make([]map[string]any, 0, len(recs))
	for _, f := range recs {
		out = append(out, s.fileJSON(f))
	}
	return map[string]any{"files": out}, nil
}

func (s *Server) addFileMessageLocked(ch *channel, id identity, ct content, threadTS string, recs []*fileRecord) *Message {
	m := &Message{Channel: ch.id, TS: s.nextTSLocked(), User: id.user, Text: ct.text, Blocks: ct.blocks, PostedAt: s.clock.Now()}
	if id.kind == tokenBot {
		m.BotID = s.opts.BotID
	}
	ch.thread(m, threadTS)
	for _, f := range recs {
		m.FileIDs = append(m.FileIDs, f.ID)
	}
	ch.add(m)
	s.echoMessageEventLocked(ch, m)
	return m
}

func (s *Server) fileJSON(f *fileRecord) map[string]any {
	mt := mime.TypeByExtension(fileExt(f.Name))
	if mt == "" {
		mt = "text/plain"
	}
	return map[string]any{
		"id": f.ID, "name": f.Name, "title": f.Title, "user": f.User, "size": len(f.Content),
		"mimetype": mt, "filetype": strings.TrimPrefix(fileExt(f.Name), "."), "channels": f.Channels,
		"url_private": s.http.URL + "/files-pri/" + s.opts.TeamID + "-" + f.ID + "/" + f.Name,
	}
}

func fileExt(name string) string {
	if i := strings.LastIndexByte(name, '.'); i >= 0 {
		return name[i:]
	}
	return ""
}
