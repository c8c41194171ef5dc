package kube

import (
	"fmt"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/hyperops/hyperops/config"
	"github.com/hyperops/hyperops/ops"
)

// Guardrails are checked before anything reads or changes the cluster; every refusal names the rule and the value.

func checkNamespace(cl *config.Cluster, ns string) error {
	if cl.AllowsNamespace(ns) {
		return nil
	}
	return ops.Unknown(ops.CodeNamespaceNotAllowed, "namespace", "allowed namespaces on "+cl.Name, ns, cl.Namespaces,
		"namespace %q is not in clusters[%s].namespaces", ns, cl.Name)
}

// checkName requires a DNS-1123 label: object names that also become label values and pod-name prefixes.
func checkName(field, name string) error {
	if errs := validation.IsDNS1123Label(name); len(errs) > 0 {
		return ops.Errorf(ops.CodeInvalidArgument, field,
			"use lower-case letters, digits and '-', starting and ending with a letter or digit, at most 63 characters",
			"%s %q is not a DNS-1123 name: %s", field, name, strings.Join(errs, "; "))
	}
	return nil
}

func checkImage(cl *config.Cluster, image string) error {
	if image == "" {
		return ops.Errorf(ops.CodeInvalidArgument, "image", "add image=REGISTRY/REPO:TAG", "image is required")
	}
	if err := checkImageRef(image); err != nil {
		return err
	}
	if cl.AllowsImage(image) {
		return nil
	}
	allowed := "none are configured"
	if len(cl.Images) > 0 {
		allowed = strings.Join(cl.Images, ", ")
	}
	return ops.Errorf(ops.CodeImageNotAllowed, "image", "use an image matching clusters["+cl.Name+"].images: "+allowed,
		"image %q matches no allowed registry glob of %s", image, cl.Name)
}

// checkLimit refuses value > limit; a limit of 0 forbids the operation altogether (fail closed).
func checkLimit(cl *config.Cluster, field string, value int64, rule string, limit int) error {
	if value < 0 {
		return ops.Errorf(ops.CodeInvalidArgument, field, field+" must be 0 or more", "%s=%d is negative", field, value)
	}
	if limit == 0 {
		return ops.Errorf(ops.CodeQuotaExceeded, field, "ask the platform team to set clusters["+cl.Name+"]."+rule,
			"clusters[%s].%s is 0, which forbids this", cl.Name, rule)
	}
	if value > int64(limit) {
		return ops.Errorf(ops.CodeQuotaExceeded, field, fmt.Sprintf("use at most %d", limit),
			"%s=%d is more than %s allows: at most %d (clusters[%s].%s=%d)", field, value, cl.Name, limit, cl.Name, rule, limit)
	}
	return nil
}

// checkQuantity parses a quantity and refuses one above max (a fact of the platform, named in rule).
func checkQuantity(field, value string, max resource.Quantity, rule string) (resource.Quantity, error) {
	q, err := resource.ParseQuantity(value)
	if err != nil {
		return q, ops.Errorf(ops.CodeInvalidArgument, field, "give a Kubernetes quantity such as 100Gi or 500m",
			"%s=%q is not a quantity", field, value)
	}
	if q.Sign() <= 0 {
		return q, ops.Errorf(ops.CodeInvalidArgument, field, field+" must be more than 0", "%s=%s is not positive", field, value)
	}
	if q.Cmp(max) > 0 {
		return q, ops.Errorf(ops.CodeQuotaExceeded, field, "use at most "+max.String(),
			"%s=%s exceeds %s (%s)", field, q.String(), max.String(), rule)
	}
	return q, nil
}

// serviceAccount resolves the execution profile by name; a request can never name a service account itself.
func serviceAccount(cl *config.Cluster, profile string) (string, error) {
	if profile == "" {
		profile = "default"
	}
	p, ok := cl.Profile(profile)
	if !ok {
		names := make([]string, 0, len(cl.Profiles))
		for n := range cl.Profiles {
			names = append(names, n)
		}
		sort.Strings(names)
		return "", ops.Errorf(ops.CodeInvalidArgument, "profile", "registered profiles: "+strings.Join(names, ", "),
			"profile %q is not registered for cluster %s", profile, cl.Name)
	}
	return p.ServiceAccount, nil
}

// checkCommand refuses argv whose first word is a shell asked to interpret a string: commands are argv only.
func checkCommand(argv []string) error {
	if len(argv) >= 2 {
		base := argv[0][strings.LastIndex(argv[0], "/")+1:]
		switch base {
		case "sh", "bash", "zsh", "dash", "ash", "ksh":
			for _, a := range argv[1:] {
				if a == "-c" || (strings.HasPrefix(a, "-") && strings.Contains(a, "c") && !strings.HasPrefix(a, "--")) {
					return ops.Errorf(ops.CodeInvalidArgument, "command", "give the program and its arguments directly, e.g. command=[python, train.py, --lr, 0.1]",
						"command runs %s -c: shell strings are not accepted, only argv", base)
				}
			}
		}
	}
	for i, a := range argv {
		if strings.ContainsRune(a, 0) {
			return ops.Errorf(ops.CodeInvalidArgument, fmt.Sprintf("command[%d]", i), "remove the NUL byte", "command[%d] contains a NUL byte", i)
		}
	}
	return nil
}

// runsAs names a workload's identity for the plan: the profile (default when the request names none) and the
// service account it maps to.
func runsAs(profile, sa string) string {
	if profile == "" {
		profile = config.DefaultProfile
	}
	return fmt.Sprintf("profile %s (service account %s)", profile, sa)
}
