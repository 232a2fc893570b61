package s3store

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"

	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster/local"
)

// The Deployment's own args, as the local provider gives them to Program: the listening
// addresses on the loopback ports of the container's ports, the volumes' directories here.
func TestProgramRunsTheContainersFlagsHere(t *testing.T) {
	dep := deployment(&Store{Name: Name, Namespace: "s3"}, Options{Image: Image})
	c := local.ProgramContainer{
		Image: Image,
		Args:  dep.Spec.Template.Spec.Containers[0].Args,
		Ports: map[int32]int{Port: 40001, AdminPort: 40002},
		Mounts: map[string]string{
			"/data": "/pods/s3_polyaxon-s3-x/volumes/data",
			"/meta": "/pods/s3_polyaxon-s3-x/volumes/meta",
			"/iam":  "/pods/s3_polyaxon-s3-x/volumes/iam",
		},
	}
	argv, err := Program("/cache/versitygw").Command(c)
	require.NoError(t, err)
	assert.Equal(t, []string{"/cache/versitygw",
		"--port", "127.0.0.1:40001", "--admin-port", "127.0.0.1:40002",
		"--region", "us-east-1", "--health", "/health", "--iam-dir", "/pods/s3_polyaxon-s3-x/volumes/iam",
		"posix", "--sidecar", "/pods/s3_polyaxon-s3-x/volumes/meta", "/pods/s3_polyaxon-s3-x/volumes/data"}, argv)

	c.Args = []string{"--port=:7070", "posix", "/data/objects", "/database"}
	argv, err = Program("/cache/versitygw").Command(c)
	require.NoError(t, err)
	assert.Equal(t, []string{"/cache/versitygw", "--port", "127.0.0.1:40001", "posix",
		"/pods/s3_polyaxon-s3-x/volumes/data/objects", "/database"}, argv, "a path under a mount; a path that only starts like one is kept")

	for name, args := range map[string][]string{
		"no --port":            {"posix", "/data"},
		"an undeclared port":   {"--port", ":9000", "posix", "/data"},
		"--port without value": {"posix", "/data", "--port"},
	} {
		c.Args = args
		_, err := Program("/cache/versitygw").Command(c)
		assert.Errorf(t, err, "%s: %q", name, args)
	}
	c.Args, c.Command = dep.Spec.Template.Spec.Containers[0].Args, []string{"/bin/sh", "-c"}
	_, err = Program("/cache/versitygw").Command(c)
	assert.Error(t, err, "a command of the container's own is not the image's entrypoint")
}

// The restricted Pod Security level's settings, and the root keys only through the Secret.
func TestDeploymentIsRestricted(t *testing.T) {
	dep := deployment(&Store{Name: Name, Namespace: "s3"}, Options{Image: Image})
	restricted(t, dep)
	ctr := dep.Spec.Template.Spec.Containers[0]
	require.Len(t, ctr.EnvFrom, 1)
	assert.Equal(t, Name+"-root", ctr.EnvFrom[0].SecretRef.Name)
	assert.Empty(t, ctr.Env)
	assert.Equal(t, "/health", ctr.ReadinessProbe.HTTPGet.Path)
}

func restricted(t *testing.T, dep *appsv1.Deployment) {
	t.Helper()
	pod := dep.Spec.Template.Spec
	require.NotNil(t, pod.SecurityContext)
	assert.True(t, *pod.SecurityContext.RunAsNonRoot)
	assert.Equal(t, int64(65534), *pod.SecurityContext.RunAsUser)
	assert.Equal(t, "RuntimeDefault", string(pod.SecurityContext.SeccompProfile.Type))
	for _, v := range pod.Volumes {
		assert.NotNilf(t, v.EmptyDir, "volume %s is an emptyDir", v.Name)
	}
	for _, c := range pod.Containers {
		sc := c.SecurityContext
		require.NotNil(t, sc)
		assert.False(t, *sc.AllowPrivilegeEscalation)
		assert.True(t, *sc.ReadOnlyRootFilesystem)
		assert.Equal(t, "ALL", string(sc.Capabilities.Drop[0]))
	}
}
