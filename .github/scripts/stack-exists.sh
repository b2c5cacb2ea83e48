#!/usr/bin/env bash
# Whether a Pulumi Cloud stack exists yet, as the step output `exists` (true/false): a preview of a stack whose
# file is new in the pull request has no state to compare with (pulumi/actions would fail with "stack not
# found"); the deploy workflow creates it on its first `pulumi up` after the merge, and the offline plan shows
# what that creates. Anything but found or not found stops the job.
#
# Environment: PULUMI_ACCESS_TOKEN, STACK (<org>/<project>/<stack>), GITHUB_OUTPUT.
# Pulumi Cloud REST API: GET /api/stacks/{organization}/{project}/{stack}.
set -euo pipefail
status=$(curl --silent --show-error --output /dev/null --write-out '%{http_code}' \
  --header "Authorization: token $PULUMI_ACCESS_TOKEN" "https://api.pulumi.com/api/stacks/$STACK")
case "$status" in
  200) echo "exists=true" >>"$GITHUB_OUTPUT" ;;
  404)
    echo "exists=false" >>"$GITHUB_OUTPUT"
    echo "::notice title=No preview of $STACK::the stack does not exist yet: the deploy workflow creates it with its first pulumi up after the merge; the offline plan shows what that creates"
    ;;
  *)
    echo "::error title=Pulumi Cloud::looking up $STACK answered HTTP $status (check secrets.PULUMI_ACCESS_TOKEN and vars.PULUMI_ORG)"
    exit 1
    ;;
esac
