package deploy

import (
	"os"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/util/version"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions"
	"k8s.io/apiserver/pkg/cel/environment"

	"github.com/nodeaddr/nodeaddr/test/harness"
)

// compileAt compiles every expression of policy as a server whose new expressions are checked at
// CEL compatibility level compat would (a 1.30 API server checks new expressions at 1.29's level),
// and returns the errors.
func compileAt(t *testing.T, compat *version.Version, p *admissionv1.ValidatingAdmissionPolicy) []string {
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

// The policies compile on the oldest supported API server, 1.30, which checks new expressions at
// the 1.29 CEL level (a policy it cannot compile is rejected, leaving its binding enforcing nothing).
// The control shows the check bites: isIP() (1.30) does not compile at that level.
func TestAdmissionPoliciesCompileOnKubernetes130(t *testing.T) {
	data, err := os.ReadFile(harness.DeployFile("admission-policy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	objs, err := harness.DecodeManifests(data)
	if err != nil {
		t.Fatal(err)
	}
	at129 := version.MajorMinor(1, 29)
	n := 0
	for _, o := range objs {
		p, ok := o.(*admissionv1.ValidatingAdmissionPolicy)
		if !ok {
			continue
		}
		n++
		for _, e := range compileAt(t, at129, p) {
			t.Errorf("%s at the 1.29 CEL level: %s", p.Name, e)
		}
		control := p.DeepCopy()
		control.Spec.Validations = append(control.Spec.Validations, admissionv1.Validation{Expression: "isIP(object.metadata.name)"})
		if errs := compileAt(t, at129, control); len(errs) != 1 {
			t.Errorf("control: isIP() at the 1.29 level gave %d errors, want 1: %v", len(errs), errs)
		}
		if errs := compileAt(t, version.MajorMinor(1, 31), control); len(errs) != 0 {
			t.Errorf("control: isIP() at the 1.31 level: %v", errs)
		}
	}
	if n != 2 {
		t.Fatalf("%d policies, want 2", n)
	}
}
