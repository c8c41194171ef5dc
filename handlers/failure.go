package handlers

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/hyperops/hyperops/ops"
)

// Why a workload failed or waits, said in words: Kubernetes names it with a reason code (BackoffLimitExceeded,
// OOMKilled), which a person should not need to look up. What Kubernetes said stays below the words (kubeSaid), for
// whoever searches it.

// reasonWords are the reason codes of Jobs, pods and Deployments that HyperOps says in words.
var reasonWords = map[string]string{
	"DeadlineExceeded":         "the job ran past its time limit (max-hours) and was stopped",
	"PodFailurePolicy":         "a pod failed in a way the job's pod failure policy ends the job on",
	"MaxFailedIndexesExceeded": "too many of the job's indexes failed",
	"FailedIndexes":            "some of the job's indexes failed",
	"OOMKilled":                "a container ran out of memory",
	"Evicted":                  "a pod was evicted from its node (the node ran short of memory or disk, or was drained)",
	"ProgressDeadlineExceeded": "the rollout made no progress before its deadline",
	"Unschedulable":            "no node can take its pods now (not enough free GPUs, CPU or memory, or no node matches)",
	"ErrImagePull":             "the image cannot be pulled (check its name, tag and registry access)",
	"ImagePullBackOff":         "the image cannot be pulled (check its name, tag and registry access)",
	"CrashLoopBackOff":         "a container keeps crashing right after it starts",
	"ContainerCannotRun":       "a container could not start",
	"StartError":               "a container could not start",
}

// reasonCode splits a reason as the watcher reports it ("pod-0: Unschedulable: 0/2 nodes…",
// "BackoffLimitExceeded: Job has reached…") into its first reason code and the rest; code is "" when it has none.
func reasonCode(reason string) (code string) {
	for _, part := range strings.Split(reason, ": ") {
		if isReasonCode(part) {
			return part
		}
	}
	return ""
}

// isReasonCode reports whether s reads like a Kubernetes reason: one CamelCase word.
func isReasonCode(s string) bool {
	if len(s) < 3 || s[0] < 'A' || s[0] > 'Z' {
		return false
	}
	for _, r := range s {
		if (r < 'a' || r > 'z') && (r < 'A' || r > 'Z') && (r < '0' || r > '9') {
			return false
		}
	}
	return true
}

// failureWords says why a workload failed or waits, in words; "" when the change says nothing HyperOps knows how to
// say (its reason is then shown as it came).
func failureWords(c ops.WatchChange) string {
	code := reasonCode(c.Reason)
	var words string
	switch {
	case code == "BackoffLimitExceeded" && c.PodsFailed > 1:
		words = fmt.Sprintf("the job's pods failed %d times (backoff limit reached)", c.PodsFailed)
	case code == "BackoffLimitExceeded" && c.PodsFailed == 1:
		words = "the job's pod failed and the job allows no retry (backoff limit reached)"
	case code == "BackoffLimitExceeded":
		words = "the job's pods failed too many times (backoff limit reached)"
	default:
		words = reasonWords[code]
	}
	switch exit := exitWords(c.Exit); {
	case words == "":
		words = exit
	case exit != "" && code != exitCode(c.Exit):
		words += "; the last one: " + exit
	}
	return words
}

// kubeSaid is what Kubernetes said of a change whose reason failureWords put in words: its reason and how the last
// container ended, verbatim.
func kubeSaid(c ops.WatchChange) string {
	said := escLine(c.Reason)
	if c.Exit != "" {
		said = strings.TrimPrefix(said+"; the last container: "+escLine(c.Exit), "; ")
	}
	return "Kubernetes: " + said
}

// exitWords says how a container ended ("OOMKilled (exit code 137)") in words.
func exitWords(exit string) string {
	code := exitCode(exit)
	if w, ok := reasonWords[code]; ok {
		return w
	}
	_, n, ok := strings.Cut(exit, "(exit code ")
	if !ok {
		return ""
	}
	if n, err := strconv.Atoi(strings.TrimSuffix(n, ")")); err == nil && n != 0 {
		return fmt.Sprintf("a container exited with code %d", n)
	}
	return ""
}

func exitCode(exit string) string {
	code, _, _ := strings.Cut(exit, " ")
	if !isReasonCode(code) {
		return ""
	}
	return code
}
