// Package operator is a stand-in for Polyaxon's operator (the polyaxon/polyaxon-operator image,
// 2.12 and later), used by the e2e tests. It is not Polyaxon's operator: that one's source and
// binary are not published, so this package does what it does, from the facts its public
// neighbours give, and nothing more.
//
// What it simulates: it watches the polyaxon.com/v1 custom resources the agent creates (Job,
// Service, KfJob, Cluster), creates each one's child object (a batch/v1 Job; a Deployment and a
// Service; a Kubeflow TFJob, PyTorchJob or MPIJob; a Ray RayCluster or a Dask DaskCluster) with
// the run's pod templates as Polyaxon built them, mirrors the child's state into the resource's
// status conditions and, with POLYAXON_SET_AGENT=true and syncStatuses, reports each transition
// to Polyaxon's API. With POLYAXON_ENABLE_LOGS_FINALIZERS=true and the internal token, a run
// whose resource says collectLogs has streams archive its pod logs (collect_run_logs) before
// its final status is reported; the published operator does that in a finalizer, when the
// resource is deleted.
//
// Facts it follows, by source:
//   - polyaxon 2.15.1 (the wheel the agent runs): _k8s/custom_resources/operation.py (group,
//     kinds, plurals), job.py, service.py, kubeflow/{tf_job,pytorch_job,mpi_job,common}.py,
//     ray_cluster.py, dask_cluster.py and setter.py (the bodies: batchJobSpec, serviceSpec,
//     tfJobSpec, pytorchJobSpec, mpiJobSpec, rayClusterSpec, daskClusterSpec, termination,
//     syncStatuses); _k8s/converter/base/base.py (the app.kubernetes.io/instance label holds the
//     run's uuid; operation.polyaxon.com/{owner,project} annotations); _sdk/api/runs_v1_api.py
//     (create_run_status) and _schemas/lifecycle.py (V1StatusCondition, V1Statuses).
//   - polyaxon/mloperator (the published v2.0 operator): controllers/config/config.go (the
//     environment keys), controllers/plugins/polyaxon.go (the status call, its headers, https
//     only on port 443; CollectPolyaxonRunLogs: the internal token and X-POLYAXON-INTERNAL),
//     controllers/operation_sync.go (where owner, project, uuid and kind are read),
//     api/v1/condition.go and operation_types.go (conditions: one per type, Status "True"),
//     controllers/managers/{jobs,deployments,services,tfjob,pytorchjob,mpijob}.go (the children,
//     MPI's main container) and controllers/utils/constant.go (restartPolicy Never,
//     backoffLimit 0 when unset).
//   - polyaxon/charts 2.15.1: polyaxon/templates/crds/ (the status schema),
//     operator-sa.yaml (since 2.12 the operator owns rayclusters and daskclusters, not rayjobs or
//     daskjobs) and agent-cm.yaml (POLYAXON_RAY_CLUSTER_ENABLED, POLYAXON_DASK_CLUSTER_ENABLED).
//   - polyaxon/haupt: apis/methods/runs.py (create_status lowercases the condition's type).
//
// Not simulated: notifications, finalizers, deleting a finished resource after its TTL, the
// Warning status read from pods, updating a child after it was created, Istio, submitting a
// Ray cluster's entrypoint, Dask autoscaling, leader election.
package operator
