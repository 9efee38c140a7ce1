package harness

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"

	certv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// ServingCSR is a kubernetes.io/kubelet-serving certificate request as a node's kubelet files it:
// subject CN system:node:Node, O system:nodes, and the SANs given (the tests' attacks set any).
type ServingCSR struct {
	Node           string
	IPs, DNS, URIs []string
	// Usages are the kubelet's (digital signature, key encipherment, server auth) when nil.
	Usages []certv1.KeyUsage
	// Key signs the request; a fresh P-256 key when nil (no approver looks at it).
	Key crypto.Signer
	// Optional, for attacks: the subject's CN (system:node:Node when empty) and O ([system:nodes]
	// when nil), email SANs, and the signer (kubernetes.io/kubelet-serving when empty).
	CommonName   string
	Organization []string
	Emails       []string
	Signer       string
}

// Object returns the CertificateSigningRequest named name, ready to be created with the kubelet's
// identity (the API server sets spec.username from the requester).
func (s ServingCSR) Object(name string) (*certv1.CertificateSigningRequest, error) {
	if s.Usages == nil {
		s.Usages = []certv1.KeyUsage{certv1.UsageDigitalSignature, certv1.UsageKeyEncipherment, certv1.UsageServerAuth}
	}
	if s.Key == nil {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, err
		}
		s.Key = key
	}
	if s.CommonName == "" {
		s.CommonName = "system:node:" + s.Node
	}
	if s.Organization == nil {
		s.Organization = []string{"system:nodes"}
	}
	if s.Signer == "" {
		s.Signer = certv1.KubeletServingSignerName
	}
	tmpl := &x509.CertificateRequest{Subject: pkix.Name{CommonName: s.CommonName, Organization: s.Organization},
		DNSNames: s.DNS, EmailAddresses: s.Emails}
	for _, ip := range s.IPs {
		p := net.ParseIP(ip)
		if p == nil {
			return nil, fmt.Errorf("CSR %s: %q is not an IP address", name, ip)
		}
		tmpl.IPAddresses = append(tmpl.IPAddresses, p)
	}
	for _, u := range s.URIs {
		p, err := url.Parse(u)
		if err != nil {
			return nil, fmt.Errorf("CSR %s: %w", name, err)
		}
		tmpl.URIs = append(tmpl.URIs, p)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, tmpl, s.Key)
	if err != nil {
		return nil, fmt.Errorf("CSR %s: %w", name, err)
	}
	return &certv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: certv1.CertificateSigningRequestSpec{SignerName: s.Signer, Usages: s.Usages,
			Request: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})},
	}, nil
}

// SetCSRCondition adds a condition of type typ to csr through the approval subresource, as kubectl
// certificate approve/deny does, with c's identity.
func SetCSRCondition(ctx context.Context, c kubernetes.Interface, csr *certv1.CertificateSigningRequest, typ certv1.RequestConditionType) error {
	csr.Status.Conditions = append(csr.Status.Conditions, certv1.CertificateSigningRequestCondition{
		Type: typ, Status: corev1.ConditionTrue, Reason: "Test", Message: "set by a test"})
	_, err := c.CertificatesV1().CertificateSigningRequests().UpdateApproval(ctx, csr.Name, csr, metav1.UpdateOptions{})
	return err
}

// DeniedByPolicy reports whether err is a 403 from the ValidatingAdmissionPolicy named policy (not
// from RBAC nor another policy), and returns the denial's message.
func DeniedByPolicy(err error, policy string) (string, bool) {
	var se *apierrors.StatusError
	if err == nil || !errors.As(err, &se) || se.ErrStatus.Code != http.StatusForbidden ||
		!strings.Contains(se.ErrStatus.Message, "ValidatingAdmissionPolicy '"+policy+"'") {
		return "", false
	}
	return se.ErrStatus.Message, true
}

// DeniedBy reports whether err is a denial by the named ValidatingAdmissionPolicy (DeniedByPolicy)
// with reason Forbidden: every validation of nodeaddr's policies sets it, so that a denial is never
// a 422 like a failed JSON-patch test.
func DeniedBy(err error, policy string) bool {
	var se *apierrors.StatusError
	_, denied := DeniedByPolicy(err, policy)
	return denied && errors.As(err, &se) && se.ErrStatus.Reason == metav1.StatusReasonForbidden
}

// DeniedByRBAC reports whether err is the authorizer's refusal (not an admission policy's).
func DeniedByRBAC(err error) bool {
	return apierrors.IsForbidden(err) && !strings.Contains(err.Error(), "ValidatingAdmissionPolicy") &&
		strings.Contains(err.Error(), "cannot")
}
