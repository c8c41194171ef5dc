package aws

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
)

var (
	// clientCall is a call on one of the SDK clients (t.sm.UpdateCluster(, t.eks.DescribeUpdate().
	clientCall = regexp.MustCompile(`\.(sm|eks|pricing)\.([A-Z][A-Za-z]+)\(`)
	// paginatorCall is a paginator, which makes the call it is named after (eks.NewListNodegroupsPaginator().
	paginatorCall = regexp.MustCompile(`\b(sagemaker|eks|pricing)\.New([A-Z][A-Za-z]+)Paginator\(`)
	// policyAction is an action of the policy in docs/deploy.md ("sagemaker:UpdateCluster").
	policyAction = regexp.MustCompile(`"((?:sagemaker|eks|pricing):[A-Za-z]+)"`)
)

var iamService = map[string]string{"sm": "sagemaker", "sagemaker": "sagemaker", "eks": "eks", "pricing": "pricing"}

// codeActions is every SageMaker, EKS and Pricing action the package's code calls, as IAM names it.
func codeActions(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("*.go")
	must(t, err)
	seen := map[string]bool{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		must(t, err)
		for _, re := range []*regexp.Regexp{clientCall, paginatorCall} {
			for _, m := range re.FindAllStringSubmatch(string(src), -1) {
				seen[iamService[m[1]]+":"+m[2]] = true
			}
		}
	}
	out := make([]string, 0, len(seen))
	for a := range seen {
		out = append(out, a)
	}
	sort.Strings(out)
	return out
}

// The IAM policy in docs/deploy.md lists exactly the AWS calls the code makes: a new call without its permission
// would fail with AccessDenied in production only, and a permission nothing uses is more than the bot needs.
func TestIAMPolicyListsEveryCall(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "deploy.md"))
	must(t, err)
	_, section, ok := strings.Cut(string(doc), "## IAM permissions")
	if !ok {
		t.Fatal(`docs/deploy.md has no "## IAM permissions" section`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	var listed []string
	for _, m := range policyAction.FindAllStringSubmatch(section, -1) {
		listed = append(listed, m[1])
	}
	sort.Strings(listed)
	code := codeActions(t)
	if len(code) < 10 || !slices.Contains(code, "sagemaker:BatchReplaceClusterNodes") {
		t.Fatalf("found only %v in the code: the patterns no longer match how it calls AWS", code)
	}
	for _, a := range code {
		if !slices.Contains(listed, a) {
			t.Errorf("the code calls %s, which the IAM policy in docs/deploy.md does not allow", a)
		}
		if !strings.Contains(section, "`"+a+"`") {
			t.Errorf("the table in docs/deploy.md does not say what %s is for", a)
		}
	}
	for _, a := range listed {
		if !slices.Contains(code, a) {
			t.Errorf("the IAM policy in docs/deploy.md allows %s, which the code never calls", a)
		}
	}
}
