// Replaces a stack's preview comment on the pull request with "preview failed for <sha>" and a link to the
// log, so that a failed preview never leaves the last successful diff standing.
//
// pulumi/actions v7 (src/libs/pr.ts, `handlePullRequestMessage`) edits the comment whose body starts with
// "#### :tropical_drink: `preview` on <project>/<stack-name>" and holds "<summary>Pulumi report</summary>",
// and posts nothing when the command fails. This comment keeps both, so the next successful preview
// replaces it in turn.
//
// Run by actions/github-script (`github`, `context`, `core`); everything else comes from the environment:
// PROJECT (Pulumi.yaml's name), STACK_NAME (the stack-name given to pulumi/actions), HEAD_SHA (the pull
// request's head commit) and LOG_URL (this run's attempt).
module.exports = async ({ github, context, core }) => {
  const { PROJECT, STACK_NAME, HEAD_SHA, LOG_URL } = process.env;
  const heading = `#### :tropical_drink: \`preview\` on ${PROJECT}/${STACK_NAME}`;
  const summary = "<summary>Pulumi report</summary>";
  const body = [
    heading,
    "",
    `:x: **preview failed for ${HEAD_SHA}**: the diff that stood here was for an earlier commit and no ` +
      `longer applies. [Log of the failed job](${LOG_URL})`,
    "",
    "<details>",
    summary,
    "",
    "No report: the job failed before `pulumi preview` finished; the log says where.",
    "</details>",
  ].join("\n");
  const { owner, repo } = context.repo;
  const issue_number = context.payload.pull_request.number;
  const comments = await github.paginate(github.rest.issues.listComments, { owner, repo, issue_number });
  const previous = comments.find(
    (c) => c.user.login === "github-actions[bot]" && c.body.startsWith(heading) && c.body.includes(summary),
  );
  if (previous) {
    await github.rest.issues.updateComment({ owner, repo, comment_id: previous.id, body });
  } else {
    await github.rest.issues.createComment({ owner, repo, issue_number, body });
  }
  core.info(`preview comment for ${STACK_NAME}: preview failed for ${HEAD_SHA}`);
};
