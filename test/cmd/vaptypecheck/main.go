// Command vaptypecheck type-checks the ValidatingAdmissionPolicies of a multi-document YAML stream
// (stdin) as kube-controller-manager's policy status controller of one Kubernetes release would, and
// prints one line per warning (none: every expression type-checks). The version matrix builds it
// against each release's libraries (harness.BuildTypeChecker), so it must compile with all of them:
// use only APIs that exist since 1.30.
package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"reflect"
	"sort"
	"strings"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta/testrestmapper"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/cel/openapi/resolver"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/kubernetes/pkg/generated/openapi"
)

func main() {
	nodeFields := flag.Bool("node-fields", false, "print the JSON paths of this release's Node fields")
	flag.Parse()
	if *nodeFields {
		for _, f := range jsonFields(reflect.TypeOf(corev1.Node{})) {
			fmt.Println(f)
		}
		return
	}
	n, warnings, err := check(os.Stdin, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "vaptypecheck:", err)
		os.Exit(2)
	}
	fmt.Fprintf(os.Stderr, "vaptypecheck: %d policies, %d warnings\n", n, warnings)
}

// check prints "POLICY FIELDREF: WARNING" for each warning and returns the number of policies
// and warnings.
func check(in io.Reader, out io.Writer) (policies, warnings int, err error) {
	tc := &validating.TypeChecker{
		SchemaResolver: resolver.NewDefinitionsSchemaResolver(openapi.GetOpenAPIDefinitions, scheme.Scheme),
		RestMapper:     testrestmapper.TestOnlyStaticRESTMapper(scheme.Scheme),
	}
	r := utilyaml.NewYAMLReader(bufio.NewReader(in))
	for {
		doc, err := r.Read()
		if err == io.EOF {
			return policies, warnings, nil
		}
		if err != nil {
			return policies, warnings, err
		}
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(doc, nil, nil)
		if err != nil {
			continue // kinds this release does not know are not policies
		}
		p, ok := obj.(*admissionv1.ValidatingAdmissionPolicy)
		if !ok {
			continue
		}
		policies++
		for _, w := range tc.Check(p) {
			warnings++
			fmt.Fprintf(out, "%s %s: %s\n", p.Name, w.FieldRef, w.Warning)
		}
	}
}

// jsonFields returns the dotted JSON paths of every field reachable from t ("status.addresses"),
// sorted.
func jsonFields(t reflect.Type) []string {
	var out []string
	var walk func(reflect.Type, string, int)
	walk = func(t reflect.Type, prefix string, depth int) {
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Map {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct || depth > 8 {
			return
		}
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
			switch {
			case name == "" && strings.Contains(opts, "inline") || f.Anonymous && name == "":
				walk(f.Type, prefix, depth+1)
			case name != "" && name != "-":
				out = append(out, prefix+name)
				walk(f.Type, prefix+name+".", depth+1)
			}
		}
	}
	walk(t, "", 0)
	sort.Strings(out)
	return out
}
