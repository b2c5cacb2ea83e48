#!/usr/bin/env bash
# After `pulumi destroy`: the EBS volumes the cluster's workloads created that nothing deleted. Their
# PersistentVolumeClaims were not Pulumi's, so they went with the cluster and left their volumes behind,
# detached and billed, with the stack's cost budget gone too. The EBS CSI driver tags every volume it creates
# with `gpu-eks/stack` (components/storage.py, `controller.extraVolumeTags`); this lists the detached ones of
# the stack as a warning and in the job summary. It deletes nothing: they may hold data someone wants.
# A failed lookup is a warning with the command to run by hand, not a failed destroy.
#
# Environment: STACK (the stack's name), GITHUB_STEP_SUMMARY; .venv (scripts/setup.sh) and the AWS CLI.
set -euo pipefail
region=$(.venv/bin/python -m synth.stack_files region "$STACK")
filters=("Name=tag:gpu-eks/stack,Values=$STACK" "Name=status,Values=available")
command="aws ec2 describe-volumes --region $region --filters ${filters[*]}"
query="Volumes[].[VolumeId,Size,Tags[?Key=='kubernetes.io/created-for/pvc/namespace']|[0].Value,Tags[?Key=='kubernetes.io/created-for/pvc/name']|[0].Value]"
if ! rows=$(aws ec2 describe-volumes --region "$region" --filters "${filters[@]}" --query "$query" \
  --output text 2>&1); then
  echo "::warning title=Volumes not checked::listing $STACK's detached EBS volumes failed ($rows); run: $command"
  exit 0
fi
if [ -z "$rows" ]; then
  echo "no detached EBS volume of $STACK is left"
  exit 0
fi
count=$(wc -l <<<"$rows")
gib=$(awk -F'\t' '{ total += $2 } END { print total }' <<<"$rows")
echo "::warning title=$count EBS volumes left::$STACK's workloads left $count detached EBS volumes ($gib GiB), billed until deleted (aws ec2 delete-volume --volume-id <id>); the job summary lists them; to list them again: $command"
{
  echo "### EBS volumes $STACK's workloads left ($count, $gib GiB)"
  echo
  echo "| volume | GiB | namespace | claim |"
  echo "|---|---|---|---|"
  # The CLI prints a missing tag as None: a volume the driver made without a claim's metadata.
  awk -F'\t' '{ for (i = 3; i <= 4; i++) if ($i == "None") $i = "-"; printf "| %s | %s | %s | %s |\n", $1, $2, $3, $4 }' <<<"$rows"
} >>"$GITHUB_STEP_SUMMARY"
