// Package celcheck type-checks and compiles the admission policies' CEL as the API server would:
// against the pinned release's schemas, and at an older release's CEL compatibility level. Its own
// package: it links k8s.io/kubernetes' OpenAPI definitions, which the harness's other users do not
// need.
package celcheck

import (
	"os"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/api/meta/testrestmapper"
	"k8s.io/apimachinery/pkg/util/version"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions"
	"k8s.io/apiserver/pkg/cel/environment"
	"k8s.io/apiserver/pkg/cel/openapi/resolver"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/kubernetes/pkg/generated/openapi"

	"github.com/nodeaddr/nodeaddr/test/harness"
)

// TypeChecker type-checks policies against the schemas of the pinned release, as
// kube-controller-manager's policy status controller does.
func TypeChecker() *validating.TypeChecker {
	return &validating.TypeChecker{
		SchemaResolver: resolver.NewDefinitionsSchemaResolver(openapi.GetOpenAPIDefinitions, scheme.Scheme),
		RestMapper:     testrestmapper.TestOnlyStaticRESTMapper(scheme.Scheme),
	}
}

// CheckPolicyShape fails t for a policy with a parameter (a missing one would block every writer
// or unconfine the agent), a validation without reason Forbidden (a 422 would look like a failed
// JSON-patch test), or an expression that does not type-check.
func CheckPolicyShape(t *testing.T, tc *validating.TypeChecker, p *admissionv1.ValidatingAdmissionPolicy) {
	t.Helper()
	if p.Spec.ParamKind != nil {
		t.Errorf("policy %s has a paramKind", p.Name)
	}
	for _, v := range p.Spec.Validations {
		if v.Reason == nil || *v.Reason != "Forbidden" {
			t.Errorf("policy %s: validation %q lacks reason: Forbidden", p.Name, v.Expression)
		}
	}
	for _, w := range tc.Check(p) {
		t.Errorf("%s: %s: %s", p.Name, w.FieldRef, w.Warning)
	}
}

// CompileAt compiles every expression of policy as a server whose new expressions are checked at
// CEL compatibility level compat would (a 1.30 API server checks new expressions at 1.29's level),
// and returns the errors.
func CompileAt(t *testing.T, compat *version.Version, p *admissionv1.ValidatingAdmissionPolicy) []string {
	t.Helper()
	c, err := plugincel.NewCompositedCompiler(environment.MustBaseEnvSet(compat))
	if err != nil {
		t.Fatal(err)
	}
	opts := plugincel.OptionalVariableDeclarations{HasParams: p.Spec.ParamKind != nil, HasAuthorizer: true}
	var errs []string
	for _, v := range p.Spec.Variables {
		if r := c.CompileAndStoreVariable(&validating.Variable{Name: v.Name, Expression: v.Expression}, opts, environment.NewExpressions); r.Error != nil {
			errs = append(errs, "variable "+v.Name+": "+r.Error.Error())
		}
	}
	check := func(what string, e plugincel.ExpressionAccessor, o plugincel.OptionalVariableDeclarations) {
		if r := c.CompileCELExpression(e, o, environment.NewExpressions); r.Error != nil {
			errs = append(errs, what+": "+r.Error.Error())
		}
	}
	for _, m := range p.Spec.MatchConditions {
		check("matchCondition "+m.Name, (*matchconditions.MatchCondition)(&m), opts)
	}
	noAuthz := opts
	noAuthz.HasAuthorizer = false
	for _, v := range p.Spec.Validations {
		check("validation", &validating.ValidationCondition{Expression: v.Expression}, opts)
		if v.MessageExpression != "" {
			check("messageExpression", &validating.MessageExpressionCondition{MessageExpression: v.MessageExpression}, noAuthz)
		}
	}
	return errs
}

// CheckPolicyFile decodes the ValidatingAdmissionPolicies and bindings of a file of deploy/, checks
// each policy's shape (CheckPolicyShape) and, unless compat is nil, compiles it at that CEL level
// (CompileAt); it returns the policies' names and the bindings, in the file's order.
func CheckPolicyFile(t *testing.T, compat *version.Version, parts ...string) (policies []string, bindings []*admissionv1.ValidatingAdmissionPolicyBinding) {
	t.Helper()
	data, err := os.ReadFile(harness.DeployFile(parts...))
	if err != nil {
		t.Fatal(err)
	}
	objs, err := harness.DecodeManifests(data)
	if err != nil {
		t.Fatal(err)
	}
	tc := TypeChecker()
	for _, o := range objs {
		switch o := o.(type) {
		case *admissionv1.ValidatingAdmissionPolicy:
			policies = append(policies, o.Name)
			CheckPolicyShape(t, tc, o)
			if compat == nil {
				continue
			}
			for _, e := range CompileAt(t, compat, o) {
				t.Errorf("%s at the %s CEL level: %s", o.Name, compat, e)
			}
		case *admissionv1.ValidatingAdmissionPolicyBinding:
			bindings = append(bindings, o)
		}
	}
	return policies, bindings
}
