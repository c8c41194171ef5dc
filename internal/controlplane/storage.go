package controlplane

import (
	"context"
	"fmt"
	"os"

	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// StorageClass is the default StorageClass kwok's volume stages provision for: a claim of
// this class is bound to a fresh PersistentVolume within seconds.
const StorageClass = "kwok-volume"

// applyManifests creates the StorageClass kwok ships next to its volume stages, so claims
// behave as on a cluster with a dynamic provisioner.
func (cp *ControlPlane) applyManifests(ctx context.Context) error {
	_, manifests, err := stageFiles(cp.opts.StageDir)
	if err != nil {
		return err
	}
	for _, path := range manifests {
		data, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("read %s: %w", path, err)
		}
		var sc storagev1.StorageClass
		if err := yaml.UnmarshalStrict(data, &sc); err != nil || sc.Kind != "StorageClass" {
			return fmt.Errorf("kwok manifest %s is neither a Stage nor a StorageClass (%v)", path, err)
		}
		_, err = cp.client.StorageV1().StorageClasses().Create(ctx, &sc, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create StorageClass %s: %w", sc.Name, err)
		}
	}
	return nil
}
