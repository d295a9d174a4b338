package deploy_test

import (
	"bufio"
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// kinds are the objects the manifests may hold, by "apiVersion kind". Any
// other kind, or a known kind under another version, is an error: add it
// here (with its Go type) when a manifest needs it.
var kinds = map[string]func() any{
	"v1 Namespace":                       func() any { return new(corev1.Namespace) },
	"v1 Service":                         func() any { return new(corev1.Service) },
	"v1 Secret":                          func() any { return new(corev1.Secret) },
	"v1 ConfigMap":                       func() any { return new(corev1.ConfigMap) },
	"v1 PersistentVolumeClaim":           func() any { return new(corev1.PersistentVolumeClaim) },
	"v1 ServiceAccount":                  func() any { return new(corev1.ServiceAccount) },
	"apps/v1 Deployment":                 func() any { return new(appsv1.Deployment) },
	"apps/v1 StatefulSet":                func() any { return new(appsv1.StatefulSet) },
	"networking.k8s.io/v1 NetworkPolicy": func() any { return new(networkingv1.NetworkPolicy) },
}

// object is one decoded YAML document.
type object struct {
	where string // "file.yaml#2", for messages
	kind  string // as in kinds
	meta  metav1.ObjectMeta
	obj   any // *corev1.Service, *appsv1.Deployment, ...
}

// decodeFile splits a multi-document YAML file as kubectl does and decodes
// every document strictly. Documents holding only comments are skipped, as
// kubectl skips them.
func decodeFile(name string, data []byte) ([]object, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var objs []object
	for i := 1; ; i++ {
		doc, err := r.Read()
		if err == io.EOF {
			return objs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		where := fmt.Sprintf("%s#%d", name, i)
		o, err := decodeDoc(doc)
		if errors.Is(err, errEmpty) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		o.where = where
		objs = append(objs, o)
	}
}

var errEmpty = errors.New("empty document")

// decodeDoc decodes one document into the Go type of its apiVersion and
// kind, refusing what the API server's strict field validation refuses:
// duplicate keys (YAML and JSON), fields the type does not have, and
// fields spelt in another case (encoding/json would take ImagePullPolicy
// for imagePullPolicy; the API server does not).
func decodeDoc(doc []byte) (object, error) {
	j, err := yaml.YAMLToJSONStrict(doc)
	if err != nil {
		return object{}, err
	}
	if bytes.Equal(bytes.TrimSpace(j), []byte("null")) {
		return object{}, errEmpty
	}
	var tm metav1.TypeMeta
	if err := kjson.UnmarshalCaseSensitivePreserveInts(j, &tm); err != nil {
		return object{}, fmt.Errorf("reading apiVersion and kind: %w", err)
	}
	kind := tm.APIVersion + " " + tm.Kind
	newObj, ok := kinds[kind]
	if !ok {
		return object{}, fmt.Errorf("unknown apiVersion %q kind %q (known: %s)", tm.APIVersion, tm.Kind, strings.Join(slices.Sorted(maps.Keys(kinds)), ", "))
	}
	obj := newObj()
	strict, err := kjson.UnmarshalStrict(j, obj)
	if err != nil {
		return object{}, fmt.Errorf("%s: %w", tm.Kind, err)
	}
	if len(strict) > 0 {
		return object{}, fmt.Errorf("%s: %w", tm.Kind, errors.Join(strict...))
	}
	m := obj.(metav1.Object)
	return object{kind: kind, meta: metav1.ObjectMeta{Name: m.GetName(), Namespace: m.GetNamespace(), Labels: m.GetLabels()}, obj: obj}, nil
}

// readManifests returns the *.yaml and *.yml files of this directory, by name.
func readManifests(t *testing.T) map[string][]byte {
	t.Helper()
	names, _ := filepath.Glob("*.y*ml") // .yaml and .yml; the pattern is valid
	if len(names) == 0 {
		t.Fatal("no *.yaml files in deploy/")
	}
	files := make(map[string][]byte)
	for _, n := range names {
		data, err := os.ReadFile(n)
		if err != nil {
			t.Fatal(err)
		}
		files[n] = data
	}
	return files
}

func decodeAll(files map[string][]byte) ([]object, error) {
	var all []object
	for _, name := range slices.Sorted(maps.Keys(files)) {
		objs, err := decodeFile(name, files[name])
		if err != nil {
			return nil, err
		}
		all = append(all, objs...)
	}
	return all, nil
}

// TestManifests decodes every manifest strictly into its Kubernetes API
// type, then checks the properties the fleet depends on (check).
func TestManifests(t *testing.T) {
	files := readManifests(t)
	var all []object
	for _, name := range slices.Sorted(maps.Keys(files)) {
		t.Run(name, func(t *testing.T) {
			objs, err := decodeFile(name, files[name])
			if err != nil {
				t.Fatal(err)
			}
			if len(objs) == 0 {
				t.Fatal("no objects")
			}
			all = append(all, objs...)
		})
	}
	if t.Failed() {
		return
	}
	goMod := readGoMod(t)
	for _, err := range check(all, goMod) {
		t.Error(err)
	}
}

// TestDecodeRefuses shows that the decoder can fail: each case is the real
// manifest with one mistake, and must be refused. The first case, with no
// change, must be accepted, so that a decoder refusing everything fails too.
func TestDecodeRefuses(t *testing.T) {
	files := readManifests(t)
	tests := []struct {
		name, file, old, new string
		wantErr              string // "" means accepted
	}{
		{"unchanged", "20-worker.yaml", "", "", ""},
		{"misspelt field", "20-worker.yaml", "imagePullPolicy:", "imagePullPolicyy:", `unknown field "spec.template.spec.containers[0].imagePullPolicyy"`},
		{"field in the wrong case", "20-worker.yaml", "imagePullPolicy:", "ImagePullPolicy:", `unknown field "spec.template.spec.containers[0].ImagePullPolicy"`},
		{"field at the wrong level", "20-worker.yaml", "      hostPID: false", "      hostPid: false", `unknown field "spec.template.spec.hostPid"`},
		{"duplicate key", "20-worker.yaml", "  replicas: 3\n", "  replicas: 3\n  replicas: 5\n", `key "replicas" already set`},
		{"wrong type", "20-worker.yaml", "  replicas: 3\n", "  replicas: three\n", "cannot unmarshal string"},
		{"bad quantity", "20-worker.yaml", "              memory: 8Gi\n              ephemeral-storage: 10Gi", "              memory: 8 gigs\n              ephemeral-storage: 10Gi", "quantities must match"},
		{"unknown kind", "20-worker.yaml", "kind: Deployment", "kind: Deploymnet", `unknown apiVersion "apps/v1" kind "Deploymnet"`},
		{"unknown version", "20-worker.yaml", "apiVersion: apps/v1", "apiVersion: apps/v1beta2", `unknown apiVersion "apps/v1beta2"`},
		{"misspelt field in a second document", "10-nats.yaml", "publishNotReadyAddresses:", "publishNotReadyAdresses:", `unknown field "spec.publishNotReadyAdresses"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mutated := mutate(t, files, tt.file, tt.old, tt.new)
			_, err := decodeFile(tt.file, mutated[tt.file])
			wantError(t, err, tt.wantErr)
		})
	}
}

// TestCheckRefuses shows that each property check can fail: each case is
// the real manifests with one property broken, and check must report it.
func TestCheckRefuses(t *testing.T) {
	files := readManifests(t)
	goMod := readGoMod(t)
	tests := []struct {
		name, file, old, new string
		wantErr              string // "" means no error
	}{
		{"unchanged", "", "", "", ""},
		{"key readable by group", "20-worker.yaml", "defaultMode: 0400", "defaultMode: 0440", "key file /keys/worker.key would have mode 0440"},
		{"key mode of the item", "20-worker.yaml", "                path: worker.key\n", "                path: worker.key\n                mode: 0644\n", "key file /keys/worker.key would have mode 0644"},
		{"fsGroup on the worker", "20-worker.yaml", "        runAsNonRoot: false\n      containers:", "        runAsNonRoot: false\n        fsGroup: 1000\n      containers:", "fsGroup"},
		{"key not from a secret", "20-worker.yaml", "        - name: key\n          secret:\n            secretName: proctor-worker-key\n            optional: false\n            defaultMode: 0400\n            items:\n              - key: worker.key\n                path: worker.key\n", "        - name: key\n          emptyDir: {}\n", "not a Secret volume"},
		{"worker not privileged", "20-worker.yaml", "privileged: true", "privileged: false", "not privileged"},
		{"worker not root", "20-worker.yaml", "          securityContext:\n            privileged: true\n            runAsUser: 0", "          securityContext:\n            privileged: true\n            runAsUser: 1000", "runs as user 1000"},
		{"worker seccomp confined", "20-worker.yaml", "            seccompProfile:\n              type: Unconfined", "            seccompProfile:\n              type: RuntimeDefault", "seccomp profile"},
		{"worker on the host network", "20-worker.yaml", "hostNetwork: false", "hostNetwork: true", "host namespaces"},
		{"worker with an API token", "20-worker.yaml", "      automountServiceAccountToken: false\n      enableServiceLinks: false\n      # The pod joins", "      enableServiceLinks: false\n      # The pod joins", "automountServiceAccountToken"},
		{"worker without --key", "20-worker.yaml", "            - --key\n            - /keys/worker.key\n", "", "no --key"},
		{"worker at another cluster", "20-worker.yaml", "nats://nats:4222", "nats://natz:4222", `no Service "natz"`},
		{"unset variable", "20-worker.yaml", "- $(POD_NAME)", "- $(POD_NAMES)", "$(POD_NAMES)"},
		{"scratch on the image", "20-worker.yaml", "            - name: scratch\n              mountPath: /scratch\n", "", "--scratch-dir /scratch is not a volume mount"},
		{"short grace period", "20-worker.yaml", "terminationGracePeriodSeconds: 300", "terminationGracePeriodSeconds: 5", "terminationGracePeriodSeconds"},
		{"not guaranteed", "20-worker.yaml", "              cpu: \"4\"\n              memory: 8Gi\n              # The two", "              cpu: \"6\"\n              memory: 8Gi\n              # The two", "Guaranteed"},
		{"selector off the template", "20-worker.yaml", "    matchLabels:\n      app.kubernetes.io/name: proctor-worker\n      app.kubernetes.io/part-of: proctor\n  template:", "    matchLabels:\n      app.kubernetes.io/name: proctor-workers\n      app.kubernetes.io/part-of: proctor\n  template:", "does not select its own pod template"},
		{"worker image latest", "20-worker.yaml", "proctor:v0.1.0", "proctor:latest", ":latest"},
		{"worker image untagged", "20-worker.yaml", "proctor:v0.1.0", "proctor", "no tag"},
		{"nats without JetStream", "10-nats.yaml", "            - -js\n", "", "without -js"},
		{"nats store off the volume", "10-nats.yaml", "              mountPath: /data", "              mountPath: /srv", "store directory /data is not on a persistent volume"},
		{"nats older than go.mod", "10-nats.yaml", "          image: nats:2.15.2-alpine\n", "          image: nats:2.10.0-alpine\n", "go.mod pins nats-server"},
		{"service selects nothing", "10-nats.yaml", "  type: ClusterIP\n  selector:\n    app.kubernetes.io/name: nats", "  type: ClusterIP\n  selector:\n    app.kubernetes.io/name: natz", `Service "nats" selects no pod template`},
		{"service port not in the pod", "10-nats.yaml", "      targetPort: client\n      protocol: TCP\n---", "      targetPort: clients\n      protocol: TCP\n---", `targetPort "clients"`},
		{"network policy selects nothing", "30-networkpolicy.yaml", "  podSelector:\n    matchLabels:\n      app.kubernetes.io/name: proctor-worker", "  podSelector:\n    matchLabels:\n      app.kubernetes.io/name: proctor-wrker", `NetworkPolicy "proctor-worker" selects no pod template`},
		{"namespace not privileged", "00-namespace.yaml", "pod-security.kubernetes.io/enforce: privileged", "pod-security.kubernetes.io/enforce: baseline", "pod-security.kubernetes.io/enforce"},
		{"wrong namespace", "10-nats.yaml", "  name: nats-headless\n  namespace: proctor", "  name: nats-headless\n  namespace: default", `namespace "default" is not in the manifests`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs, err := decodeAll(mutate(t, files, tt.file, tt.old, tt.new))
			if err != nil {
				t.Fatalf("the changed manifests do not decode: %v", err)
			}
			wantError(t, errors.Join(check(objs, goMod)...), tt.wantErr)
		})
	}
}

// mutate returns a copy of files with old replaced by new in file; old
// must occur there exactly once, so that a manifest edit that moves it
// breaks the case loudly instead of testing nothing. An empty old changes
// nothing.
func mutate(t *testing.T, files map[string][]byte, file, old, new string) map[string][]byte {
	t.Helper()
	out := maps.Clone(files)
	if old == "" {
		return out
	}
	data, ok := files[file]
	if !ok {
		t.Fatalf("%s: no such manifest", file)
	}
	if n := strings.Count(string(data), old); n != 1 {
		t.Fatalf("%s: %q occurs %d times, want once", file, old, n)
	}
	out[file] = []byte(strings.Replace(string(data), old, new, 1))
	return out
}

// wantError fails t unless err contains want, or is nil for an empty want.
func wantError(t *testing.T, err error, want string) {
	t.Helper()
	switch {
	case want == "" && err != nil:
		t.Fatalf("refused: %v", err)
	case want != "" && err == nil:
		t.Fatalf("accepted, want an error containing %q", want)
	case want != "" && !strings.Contains(err.Error(), want):
		t.Fatalf("errors:\n%v\nwant one containing %q", err, want)
	}
}

func readGoMod(t *testing.T) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// check returns every broken property of a set of decoded manifests. goMod
// is the module's go.mod, for the NATS server version.
func check(objs []object, goMod []byte) []error {
	c := &checker{objs: objs}
	c.workloads = workloadsOf(objs)
	c.metadata()
	c.templates()
	c.services()
	c.networkPolicies()
	c.worker()
	c.nats(goMod)
	return c.errs
}

type checker struct {
	objs      []object
	workloads []workload
	errs      []error
}

func (c *checker) errorf(format string, args ...any) {
	c.errs = append(c.errs, fmt.Errorf(format, args...))
}

// workload is an object with a pod template.
type workload struct {
	object
	selector *metav1.LabelSelector
	template *corev1.PodTemplateSpec
	claims   []string // volumeClaimTemplates of a StatefulSet
}

func workloadsOf(objs []object) []workload {
	var ws []workload
	for _, o := range objs {
		switch v := o.obj.(type) {
		case *appsv1.Deployment:
			ws = append(ws, workload{object: o, selector: v.Spec.Selector, template: &v.Spec.Template})
		case *appsv1.StatefulSet:
			w := workload{object: o, selector: v.Spec.Selector, template: &v.Spec.Template}
			for _, pvc := range v.Spec.VolumeClaimTemplates {
				w.claims = append(w.claims, pvc.Name)
			}
			ws = append(ws, w)
		}
	}
	return ws
}

func (o object) String() string {
	return fmt.Sprintf("%s %s %q", o.where, o.kind[strings.LastIndex(o.kind, " ")+1:], o.meta.Name)
}

// find returns the object of a kind ("Service") with a name in a namespace.
func (c *checker) find(kind, namespace, name string) (object, bool) {
	for _, o := range c.objs {
		if strings.HasSuffix(o.kind, " "+kind) && o.meta.Namespace == namespace && o.meta.Name == name {
			return o, true
		}
	}
	return object{}, false
}

// selecting returns the pod templates in namespace whose labels sel matches.
func (c *checker) selecting(namespace string, sel labels.Selector) []workload {
	var ws []workload
	for _, w := range c.workloads {
		if w.meta.Namespace == namespace && sel.Matches(labels.Set(w.template.Labels)) {
			ws = append(ws, w)
		}
	}
	return ws
}

// metadata: valid, unique names and labels; every namespace is created by
// the manifests; a namespace with privileged pods lets them in.
func (c *checker) metadata() {
	namespaces := map[string]*corev1.Namespace{}
	for _, o := range c.objs {
		if ns, ok := o.obj.(*corev1.Namespace); ok {
			namespaces[ns.Name] = ns
		}
	}
	seen := map[string]string{}
	for _, o := range c.objs {
		id := o.kind + " " + o.meta.Namespace + "/" + o.meta.Name
		if prev, ok := seen[id]; ok {
			c.errorf("%s: also defined in %s", o, prev)
		}
		seen[id] = o.where
		nameErrs := validation.IsDNS1123Subdomain(o.meta.Name)
		if _, ok := o.obj.(*corev1.Service); ok {
			nameErrs = validation.IsDNS1035Label(o.meta.Name)
		}
		for _, e := range nameErrs {
			c.errorf("%s: name: %s", o, e)
		}
		for k, v := range o.meta.Labels {
			for _, e := range append(validation.IsQualifiedName(k), validation.IsValidLabelValue(v)...) {
				c.errorf("%s: label %s=%s: %s", o, k, v, e)
			}
		}
		if _, ok := o.obj.(*corev1.Namespace); ok {
			continue
		}
		if o.meta.Namespace == "" {
			c.errorf("%s: no metadata.namespace (it would land in whatever namespace kubectl is set to)", o)
		} else if namespaces[o.meta.Namespace] == nil {
			c.errorf("%s: namespace %q is not in the manifests", o, o.meta.Namespace)
		}
	}
	for _, w := range c.workloads {
		ns := namespaces[w.meta.Namespace]
		if ns == nil || !privileged(w.template) {
			continue
		}
		if lvl := ns.Labels["pod-security.kubernetes.io/enforce"]; lvl != "privileged" {
			c.errorf("Namespace %q: pod-security.kubernetes.io/enforce is %q; %s runs privileged containers, which only \"privileged\" admits", ns.Name, lvl, w)
		}
	}
}

func privileged(t *corev1.PodTemplateSpec) bool {
	for _, ctr := range t.Spec.Containers {
		if sc := ctr.SecurityContext; sc != nil && sc.Privileged != nil && *sc.Privileged {
			return true
		}
	}
	return false
}

var varRef = regexp.MustCompile(`\$\(([^)]*)\)`)

// templates: each selector selects its own template; images are pinned;
// every $(VAR) in a command line is defined (the kubelet leaves an
// undefined one as it is, silently); every mount has its volume.
func (c *checker) templates() {
	for _, w := range c.workloads {
		sel, err := metav1.LabelSelectorAsSelector(w.selector)
		switch {
		case err != nil:
			c.errorf("%s: selector: %v", w, err)
		case sel.Empty():
			c.errorf("%s: empty selector", w)
		case !sel.Matches(labels.Set(w.template.Labels)):
			c.errorf("%s: selector %s does not select its own pod template (labels %v)", w, sel, w.template.Labels)
		}
		if ss, ok := w.obj.(*appsv1.StatefulSet); ok {
			svc, ok := c.find("Service", w.meta.Namespace, ss.Spec.ServiceName)
			if !ok || svc.obj.(*corev1.Service).Spec.ClusterIP != corev1.ClusterIPNone {
				c.errorf("%s: serviceName %q is no headless Service in the manifests", w, ss.Spec.ServiceName)
			}
		}
		volumes := map[string]bool{}
		for _, v := range w.template.Spec.Volumes {
			volumes[v.Name] = true
		}
		for _, n := range w.claims {
			volumes[n] = true
		}
		for _, ctr := range append(slices.Clone(w.template.Spec.InitContainers), w.template.Spec.Containers...) {
			if err := checkImage(ctr.Image); err != nil {
				c.errorf("%s: container %q: %v", w, ctr.Name, err)
			}
			env := map[string]bool{}
			for _, e := range ctr.Env {
				env[e.Name] = true
			}
			for _, arg := range append(slices.Clone(ctr.Command), ctr.Args...) {
				for _, m := range varRef.FindAllStringSubmatch(arg, -1) {
					if !env[m[1]] && len(ctr.EnvFrom) == 0 {
						c.errorf("%s: container %q: %s in %q is not in its env", w, ctr.Name, m[0], arg)
					}
				}
			}
			for _, m := range ctr.VolumeMounts {
				if !volumes[m.Name] {
					c.errorf("%s: container %q: mount %s: no volume %q", w, ctr.Name, m.MountPath, m.Name)
				}
			}
		}
	}
}

var digestRE = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// checkImage refuses an image reference without a tag (which means
// :latest), with :latest, or with a malformed digest.
func checkImage(ref string) error {
	_, tag, digest := splitImage(ref)
	switch {
	case digest != "" && !digestRE.MatchString(digest):
		return fmt.Errorf("image %q: digest %q is not sha256:<64 hex digits>", ref, digest)
	case tag == "" && digest == "":
		return fmt.Errorf("image %q has no tag (so :latest): pin a version", ref)
	case tag == "latest":
		return fmt.Errorf("image %q: :latest moves; pin a version", ref)
	}
	return nil
}

// splitImage splits "name:tag@digest", tag and digest being optional.
func splitImage(ref string) (name, tag, digest string) {
	if i := strings.Index(ref, "@"); i >= 0 {
		ref, digest = ref[:i], ref[i+1:]
	}
	if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		ref, tag = ref[:i], ref[i+1:]
	}
	return ref, tag, digest
}

// services: each selects some pod template in its namespace, and each
// target port is a port of every template it selects.
func (c *checker) services() {
	for _, o := range c.objs {
		svc, ok := o.obj.(*corev1.Service)
		if !ok {
			continue
		}
		if len(svc.Spec.Selector) == 0 {
			c.errorf("%s: no selector", o)
			continue
		}
		targets := c.selecting(svc.Namespace, labels.SelectorFromSet(svc.Spec.Selector))
		if len(targets) == 0 {
			c.errorf("Service %q selects no pod template (selector %v)", svc.Name, svc.Spec.Selector)
		}
		for _, p := range svc.Spec.Ports {
			for _, w := range targets {
				if !hasContainerPort(w.template, p) {
					c.errorf("Service %q port %q: targetPort %q is no container port of %s", svc.Name, p.Name, p.TargetPort.String(), w)
				}
			}
		}
	}
}

func hasContainerPort(t *corev1.PodTemplateSpec, p corev1.ServicePort) bool {
	for _, ctr := range t.Spec.Containers {
		for _, cp := range ctr.Ports {
			switch {
			case p.TargetPort.StrVal != "" && cp.Name == p.TargetPort.StrVal,
				p.TargetPort.StrVal == "" && p.TargetPort.IntVal != 0 && cp.ContainerPort == p.TargetPort.IntVal,
				p.TargetPort.StrVal == "" && p.TargetPort.IntVal == 0 && cp.ContainerPort == p.Port:
				return true
			}
		}
	}
	return false
}

// networkPolicies: a policy whose selector matches no pod protects nothing,
// and a peer selector that matches no pod lets nobody in; both are typos.
func (c *checker) networkPolicies() {
	for _, o := range c.objs {
		np, ok := o.obj.(*networkingv1.NetworkPolicy)
		if !ok {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
		if err != nil {
			c.errorf("%s: podSelector: %v", o, err)
			continue
		}
		if len(c.selecting(np.Namespace, sel)) == 0 {
			c.errorf("NetworkPolicy %q selects no pod template (%s)", np.Name, sel)
		}
		for _, rule := range np.Spec.Ingress {
			for _, peer := range rule.From {
				if peer.PodSelector == nil || peer.NamespaceSelector != nil {
					continue
				}
				sel, err := metav1.LabelSelectorAsSelector(peer.PodSelector)
				if err != nil {
					c.errorf("%s: from.podSelector: %v", o, err)
				} else if len(c.selecting(np.Namespace, sel)) == 0 {
					c.errorf("NetworkPolicy %q: from.podSelector %s matches no pod template", np.Name, sel)
				}
			}
		}
	}
}

// flagValue returns the value of the first of names in args, given as
// "--name value" or "--name=value", with one dash or two.
func flagValue(args []string, names ...string) (string, bool) {
	for i, a := range args {
		for _, n := range names {
			for _, f := range []string{"-" + n, "--" + n} {
				if a == f && i+1 < len(args) {
					return args[i+1], true
				}
				if v, ok := strings.CutPrefix(a, f+"="); ok {
					return v, true
				}
			}
		}
	}
	return "", false
}

// hasFlag reports whether a boolean flag is on in args.
func hasFlag(args []string, names ...string) bool {
	for _, a := range args {
		for _, n := range names {
			if a == "-"+n || a == "--"+n || a == "-"+n+"=true" || a == "--"+n+"=true" {
				return true
			}
		}
	}
	return false
}

// container is one container of a workload.
type container struct {
	w   workload
	ctr *corev1.Container
}

// containers returns the containers of all workloads that match.
func (c *checker) containers(match func(*corev1.Container) bool) []container {
	var found []container
	for _, w := range c.workloads {
		for i := range w.template.Spec.Containers {
			if ctr := &w.template.Spec.Containers[i]; match(ctr) {
				found = append(found, container{w, ctr})
			}
		}
	}
	return found
}

func mountAt(ctr *corev1.Container, dir string) (corev1.VolumeMount, bool) {
	for _, m := range ctr.VolumeMounts {
		if path.Clean(m.MountPath) == path.Clean(dir) {
			return m, true
		}
	}
	return corev1.VolumeMount{}, false
}

func volumeNamed(spec *corev1.PodSpec, name string) *corev1.Volume {
	for i := range spec.Volumes {
		if spec.Volumes[i].Name == name {
			return &spec.Volumes[i]
		}
	}
	return nil
}

// worker: the sandbox's needs (privileged, root, unconfined), nothing more
// from the host, a key only its owner may read, and a command line that
// reaches the cluster in the manifests.
func (c *checker) worker() {
	workers := c.containers(func(ctr *corev1.Container) bool {
		return strings.Contains(ctr.Image, "proctor") && slices.Contains(append(slices.Clone(ctr.Command), ctr.Args...), "worker")
	})
	if len(workers) == 0 {
		c.errorf("no worker: no container runs proctor worker")
	}
	for _, wc := range workers {
		w, ctr := wc.w, wc.ctr
		at := fmt.Sprintf("%s: container %q", w, ctr.Name)
		spec := &w.template.Spec
		podSC := cmp.Or(spec.SecurityContext, &corev1.PodSecurityContext{})
		sc := cmp.Or(ctr.SecurityContext, &corev1.SecurityContext{})

		// What the sandbox needs; a container's setting wins over the pod's.
		if sc.Privileged == nil || !*sc.Privileged {
			c.errorf("%s: not privileged: the sandbox mounts, makes namespaces and writes cgroups", at)
		}
		if uid := cmp.Or(sc.RunAsUser, podSC.RunAsUser); uid == nil {
			c.errorf("%s: runAsUser unset: the image would decide; the sandbox needs root (0)", at)
		} else if *uid != 0 {
			c.errorf("%s: runs as user %d; the sandbox needs root (0)", at, *uid)
		}
		if seccomp := cmp.Or(sc.SeccompProfile, podSC.SeccompProfile); seccomp == nil || seccomp.Type != corev1.SeccompProfileTypeUnconfined {
			c.errorf("%s: seccomp profile %s: want Unconfined, the runtime's default refuses unshare and mount", at, show(seccomp))
		}
		if apparmor := cmp.Or(sc.AppArmorProfile, podSC.AppArmorProfile); apparmor == nil || apparmor.Type != corev1.AppArmorProfileTypeUnconfined {
			c.errorf("%s: AppArmor profile %s: want Unconfined, the runtime's default refuses mount", at, show(apparmor))
		}

		// Nothing more from the host than that.
		if spec.HostPID || spec.HostNetwork || spec.HostIPC {
			c.errorf("%s: shares host namespaces (hostPID %v, hostNetwork %v, hostIPC %v); the sandbox makes its own", w, spec.HostPID, spec.HostNetwork, spec.HostIPC)
		}
		if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
			c.errorf("%s: automountServiceAccountToken must be false: a privileged pod needs no Kubernetes API token to lose", w)
		}
		if podSC.FSGroup != nil {
			c.errorf("%s: fsGroup %d makes the key file group-readable (0440), which proctor refuses", w, *podSC.FSGroup)
		}
		if g := spec.TerminationGracePeriodSeconds; g == nil || *g < 60 {
			c.errorf("%s: terminationGracePeriodSeconds %s: want 60 or more, time to tear the sandboxes down", w, show(g))
		}
		for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			req, lim := ctr.Resources.Requests[r], ctr.Resources.Limits[r]
			if lim.IsZero() || req.Cmp(lim) != 0 {
				c.errorf("%s: %s request %s and limit %s: want them set and equal (Guaranteed QoS, for steady timings)", at, r, req.String(), lim.String())
			}
		}

		// The command line.
		args := append(slices.Clone(ctr.Command), ctr.Args...)
		if url, ok := flagValue(args, "cluster"); !ok {
			c.errorf("%s: no --cluster", at)
		} else {
			c.checkClusterURL(at, w.meta.Namespace, url)
		}
		if n, ok := flagValue(args, "jobs"); ok && !regexp.MustCompile(`^[1-9][0-9]*$`).MatchString(n) {
			c.errorf("%s: --jobs %q: want a positive number", at, n)
		}
		if key, ok := flagValue(args, "key"); !ok {
			c.errorf("%s: no --key: the worker would sign nothing the coordinator trusts", at)
		} else {
			c.checkKey(at, spec, ctr, key)
		}
		if trust, ok := flagValue(args, "trust"); !ok {
			c.errorf("%s: no --trust: the worker would run no coordinator's trials", at)
		} else if m, ok := mountAt(ctr, path.Dir(trust)); !ok || !m.ReadOnly {
			c.errorf("%s: --trust %s is not on a read-only volume mount", at, trust)
		}
		for _, f := range []string{"scratch-dir", "cache-dir"} {
			dir, ok := flagValue(args, f)
			if !ok {
				c.errorf("%s: no --%s", at, f)
				continue
			}
			m, ok := mountAt(ctr, dir)
			if !ok {
				c.errorf("%s: --%s %s is not a volume mount (overlayfs cannot use the image's overlay root)", at, f, dir)
				continue
			}
			if v := volumeNamed(spec, m.Name); v != nil && v.EmptyDir == nil && v.PersistentVolumeClaim == nil && v.Ephemeral == nil {
				c.errorf("%s: --%s %s: volume %q is neither an emptyDir nor a PVC", at, f, dir, m.Name)
			}
		}
	}
}

// show prints what p points to, or "unset".
func show[T any](p *T) string {
	if p == nil {
		return "unset"
	}
	return fmt.Sprintf("%+v", *p)
}

// checkClusterURL: the worker's nats://HOST:PORT is a Service of the
// manifests with that port.
func (c *checker) checkClusterURL(at, namespace, url string) {
	hostPort, ok := strings.CutPrefix(url, "nats://")
	if !ok {
		c.errorf("%s: --cluster %q: want nats://HOST:PORT", at, url)
		return
	}
	if i := strings.LastIndex(hostPort, "@"); i >= 0 {
		hostPort = hostPort[i+1:]
	}
	host, port, _ := strings.Cut(hostPort, ":")
	if port == "" {
		port = "4222"
	}
	o, ok := c.find("Service", namespace, host)
	if !ok {
		c.errorf("%s: --cluster %q: no Service %q in namespace %q", at, url, host, namespace)
		return
	}
	for _, p := range o.obj.(*corev1.Service).Spec.Ports {
		if fmt.Sprint(p.Port) == port {
			return
		}
	}
	c.errorf("%s: --cluster %q: Service %q has no port %s", at, url, host, port)
}

// checkKey: the key file comes from a Secret, read-only, with a mode that
// gives group and others nothing (proctor refuses the key otherwise).
func (c *checker) checkKey(at string, spec *corev1.PodSpec, ctr *corev1.Container, key string) {
	dir, file := path.Split(key)
	m, ok := mountAt(ctr, dir)
	if !ok {
		c.errorf("%s: --key %s: %s is not a volume mount", at, key, dir)
		return
	}
	if !m.ReadOnly {
		c.errorf("%s: --key %s: mount %s is not readOnly", at, key, m.MountPath)
	}
	v := volumeNamed(spec, m.Name)
	if v == nil || v.Secret == nil {
		c.errorf("%s: --key %s: volume %q is not a Secret volume", at, key, m.Name)
		return
	}
	mode := int32(corev1.SecretVolumeSourceDefaultMode)
	if v.Secret.DefaultMode != nil {
		mode = *v.Secret.DefaultMode
	}
	if len(v.Secret.Items) > 0 {
		i := slices.IndexFunc(v.Secret.Items, func(it corev1.KeyToPath) bool { return it.Path == file })
		if i < 0 {
			c.errorf("%s: --key %s: Secret volume %q has no item with path %s", at, key, m.Name, file)
			return
		}
		if it := v.Secret.Items[i]; it.Mode != nil {
			mode = *it.Mode
		}
	}
	if mode&0o077 != 0 {
		c.errorf("%s: key file %s would have mode %04o: proctor refuses a private key its group or others may read (want 0400 or 0600)", at, key, mode)
	}
}

var natsModule = regexp.MustCompile(`(?m)^\s*(?:require\s+)?github\.com/nats-io/nats-server/v2\s+v(\d+\.\d+)\.`)

// nats: JetStream on, its store on a persistent volume, and the server of
// the minor version go.mod pins (the one Proctor's tests run against).
func (c *checker) nats(goMod []byte) {
	servers := c.containers(func(ctr *corev1.Container) bool {
		name, _, _ := splitImage(ctr.Image)
		return name == "nats" || strings.HasSuffix(name, "/nats")
	})
	if len(servers) == 0 {
		c.errorf("no NATS server: no container runs the nats image")
	}
	m := natsModule.FindSubmatch(goMod)
	for _, sc := range servers {
		w, ctr := sc.w, sc.ctr
		at := fmt.Sprintf("%s: container %q", w, ctr.Name)
		args := append(slices.Clone(ctr.Command), ctr.Args...)
		if !hasFlag(args, "js", "jetstream") {
			c.errorf("%s: runs without -js: no JetStream, no work queue", at)
		}
		dir, ok := flagValue(args, "sd", "store_dir")
		if !ok {
			c.errorf("%s: no -sd: JetStream would store in a temporary directory", at)
		} else if mnt, ok := mountAt(ctr, dir); !ok || !persistent(w, mnt.Name) {
			c.errorf("%s: store directory %s is not on a persistent volume: a restart would lose the queue and the results", at, dir)
		}
		_, tag, _ := splitImage(ctr.Image)
		switch {
		case m == nil:
			c.errorf("go.mod: no github.com/nats-io/nats-server/v2 requirement")
		case tag != string(m[1]) && !strings.HasPrefix(tag, string(m[1])+".") && !strings.HasPrefix(tag, string(m[1])+"-"):
			c.errorf("%s: image %s: go.mod pins nats-server v%s.x, the version Proctor's tests run against; move the image or go.mod", at, ctr.Image, m[1])
		}
	}
}

// persistent reports whether the volume named name of w outlives its pod.
func persistent(w workload, name string) bool {
	if slices.Contains(w.claims, name) {
		return true
	}
	v := volumeNamed(&w.template.Spec, name)
	return v != nil && v.PersistentVolumeClaim != nil
}
