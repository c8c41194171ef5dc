package handlers

import (
	"errors"
	"strconv"

	"github.com/slack-go/slack"
)

// Failure says what a failed Slack call means for the message it carried.
type Failure int

const (
	// Transient: Slack may take the same call later (429, 5xx, a dropped connection, a timeout, Slack's own
	// internal_error, and every failure that is not an answer of Slack's, e.g. the state store's). The message is
	// retried with backoff; nothing is lost. A 5xx, reset or timeout may come after Slack posted the message.
	Transient Failure = iota
	// Permanent: Slack answered that this message can never go there (the channel is gone or archived, the bot
	// is not in it, the thread or message is gone). Retrying would block the request's later messages for good.
	Permanent
	// Rejected: Slack refused the content (invalid blocks, too long). A plain-text version may still go.
	Rejected
)

// transientCodes are Slack error answers worth retrying.
var transientCodes = map[string]bool{
	"internal_error": true, "fatal_error": true, "service_unavailable": true, "ratelimited": true,
	"request_timeout": true, "team_added_to_org": true,
	// A token or scope problem is the whole bot's, not one message's: declaring every message undeliverable until
	// an operator fixes the token would lose them all. They wait (readiness and the Slack call metrics show it).
	"invalid_auth": true, "not_authed": true, "account_inactive": true, "token_revoked": true, "token_expired": true,
	"missing_scope": true, "no_permission": true, "not_allowed_token_type": true, "ekm_access_denied": true,
}

// rejectedCodes are Slack error answers about the content of the message.
var rejectedCodes = map[string]bool{
	"invalid_blocks": true, "invalid_blocks_format": true, "msg_too_long": true, "too_many_attachments": true,
	"invalid_attachments": true, "invalid_metadata_format": true, "invalid_metadata_schema": true,
	"metadata_too_large": true, "metadata_must_be_sent_from_app": true,
}

// Classify says whether a failed Slack call may succeed later. Every Slack error answer that is neither listed as
// transient nor about the content is permanent: channel_not_found, not_in_channel, is_archived,
// channel_is_archived, no_text, thread_not_found, message_not_found, cant_update_message, edit_window_closed,
// restricted_action (and its _read_only_channel, _thread_only_channel, _non_threadable_channel forms),
// user_not_found, cannot_dm_bot, messages_tab_disabled, and codes Slack adds later: Slack gave a deliberate
// answer, and the same call would get it again.
func Classify(err error) Failure {
	var rl *slack.RateLimitedError
	var sc slack.StatusCodeError
	var se slack.SlackErrorResponse
	switch {
	case err == nil, errors.As(err, &rl), errors.As(err, &sc):
		return Transient
	case errors.As(err, &se):
		switch {
		case transientCodes[se.Err]:
			return Transient
		case rejectedCodes[se.Err]:
			return Rejected
		}
		return Permanent
	}
	return Transient
}

// SlackCode is Slack's error code in err ("ratelimited" for a 429, "http_<status>" for an HTTP error), or "" when
// err is not an answer of Slack's (a timeout, a dropped connection).
func SlackCode(err error) string {
	var rl *slack.RateLimitedError
	var sc slack.StatusCodeError
	var se slack.SlackErrorResponse
	switch {
	case errors.As(err, &rl):
		return "ratelimited"
	case errors.As(err, &sc):
		return "http_" + strconv.Itoa(sc.Code)
	case errors.As(err, &se):
		return se.Err
	}
	return ""
}
