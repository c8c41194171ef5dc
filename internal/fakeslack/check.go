package fakeslack

import (
	"encoding/json"
	"strings"
	"unicode/utf8"
)

// MessageError is why Slack would refuse a message: its error code and, for invalid_blocks, the problems in
// Slack's wording.
type MessageError struct {
	Code     string
	Problems []string
}

func (e *MessageError) Error() string {
	if len(e.Problems) == 0 {
		return e.Code
	}
	return e.Code + ": " + strings.Join(e.Problems, "; ")
}

// CheckMessage checks a message as chat.postMessage does, without a server: the top-level text limit, every Block
// Kit rule of the blocks (a JSON array; empty means none) and the metadata's shape (empty means none). Tests that
// render messages without posting them (fuzzing the renderers) use it; it is the same code the Web API runs.
func CheckMessage(text string, blocks, metadata []byte) error {
	if aerr := checkContent(text, string(blocks), string(metadata)); aerr != nil {
		return &MessageError{Code: aerr.code, Problems: aerr.messages}
	}
	return nil
}

// checkContent applies Slack's limits on a message's text, blocks and metadata.
func checkContent(text, blocks, metadata string) *apiError {
	if utf8.RuneCountInString(text) > maxMessageText {
		return errCode("msg_too_long")
	}
	if blocks != "" {
		if code, problems := validateBlocks(blocks, surfaceMessage, "/blocks"); code != "" {
			return errCode(code, problems...)
		}
	}
	if metadata != "" {
		if _, aerr := readMetadata(metadata); aerr != nil {
			return aerr
		}
	}
	return nil
}

// readMetadata reads message metadata: an event_type and an event_payload object.
func readMetadata(raw string) (*Metadata, *apiError) {
	var md Metadata
	if err := json.Unmarshal([]byte(raw), &md); err != nil {
		return nil, errCode("invalid_metadata_format")
	}
	if md.EventType == "" || len(md.EventPayload) == 0 || md.EventPayload[0] != '{' {
		return nil, errCode("invalid_metadata_schema")
	}
	return &md, nil
}

// CheckView checks a modal view as views.open does, without a server: its title, submit and close (plain text, at
// most 24 characters each), callback id, private metadata and every Block Kit rule of its blocks. Tests that render
// modals without opening them use it; it is the same code the Web API runs.
func CheckView(view []byte) error {
	if problems := validateView(string(view)); len(problems) > 0 {
		return &MessageError{Code: "invalid_arguments", Problems: problems}
	}
	return nil
}
