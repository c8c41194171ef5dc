package kube

import (
	"regexp"
	"strings"

	"github.com/hyperops/hyperops/ops"
)

// imageRef is the grammar of a container image reference (github.com/distribution/reference):
// [registry[:port]/]path[:tag][@digest], path components lower-case alphanumerics with . _ __ - separators.
var imageRef = regexp.MustCompile(`^` +
	`(?:(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)*|\[[0-9a-fA-F:]+\])(?::[0-9]+)?/)?` +
	`[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*` +
	`(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?` +
	`(?:@[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,})?$`)

// maxImageRef is the longest reference accepted (the reference library's limit for the name part is 255).
const maxImageRef = 512

// checkImageRef refuses what is not an image reference (spaces, control characters, markup, a glob) before any
// allowed-registry glob is matched against it, so a glob never matches hostile text.
func checkImageRef(image string) error {
	if len(image) <= maxImageRef && imageRef.MatchString(image) {
		return nil
	}
	why := "it is not REGISTRY/REPOSITORY[:TAG][@DIGEST]"
	switch {
	case len(image) > maxImageRef:
		why = "it is longer than 512 characters"
	case strings.ContainsAny(image, " \t\r\n"):
		why = "it contains whitespace"
	case strings.ContainsAny(image, "<>&`|*?"):
		why = "it contains characters no image reference has (< > & ` | * ?)"
	}
	return ops.Errorf(ops.CodeInvalidArgument, "image", "give an image like 123456789012.dkr.ecr.us-west-2.amazonaws.com/trainer:v17",
		"image is not a valid image reference: %s", why)
}
