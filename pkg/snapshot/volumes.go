package snapshot

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"

	"github.com/karpenter-go/karpenter/pkg/scheduling"
)

func usesVolumes(pods []*corev1.Pod) bool {
	for _, pod := range pods {
		for _, v := range pod.Spec.Volumes {
			if v.PersistentVolumeClaim != nil || v.Ephemeral != nil {
				return true
			}
		}
	}
	return false
}

// addVolumes lists storage objects only when some pod needs them, so that a
// cluster without volumes never starts informers for them.
func (b *Builder) addVolumes(ctx context.Context, in *scheduling.Input) error {
	pvcs := &corev1.PersistentVolumeClaimList{}
	if err := b.kube.List(ctx, pvcs); err != nil {
		return fmt.Errorf("listing persistentvolumeclaims: %w", err)
	}
	for i := range pvcs.Items {
		in.PersistentVolumeClaims = append(in.PersistentVolumeClaims, &pvcs.Items[i])
	}
	pvs := &corev1.PersistentVolumeList{}
	if err := b.kube.List(ctx, pvs); err != nil {
		return fmt.Errorf("listing persistentvolumes: %w", err)
	}
	for i := range pvs.Items {
		in.PersistentVolumes = append(in.PersistentVolumes, &pvs.Items[i])
	}
	scs := &storagev1.StorageClassList{}
	if err := b.kube.List(ctx, scs); err != nil {
		return fmt.Errorf("listing storageclasses: %w", err)
	}
	for i := range scs.Items {
		in.StorageClasses = append(in.StorageClasses, &scs.Items[i])
	}
	return nil
}
