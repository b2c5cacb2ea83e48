// Keeps each stack's preview comment on the pull request honest about the commit it is for, so that a diff
// for an earlier commit never stands as if current.
//
// pulumi/actions v7 (src/libs/pr.ts, `handlePullRequestMessage`) writes the diff: it edits the comment whose
// body starts with "#### :tropical_drink: `preview` on <project>/<stack-name>" and holds
// "<summary>Pulumi report</summary>", names no commit, and posts nothing when the command fails. Every body
// written here keeps both, so the next successful preview replaces it in turn, and carries a
// `<!-- gpu-eks:preview-of <sha> -->` stamp naming the commit it speaks for. STATE says what to write:
//   previewed      the stack's comment pulumi/actions just wrote (the one without a stamp) gets one
//   failure        the stack's comments say "preview failed for <sha>" with the log (posted if none yet)
//   cancelled      the same, "preview cancelled for <sha>"
//   not-previewed  every stack's comment that is not for <sha> says "not previewed for <sha>" and why
//                  (NEEDS: the run's `needs` results), or that a newer push superseded it
// A comment stamped with the pull request's current head by a newer run is never touched by an older one,
// nor, once a newer push exists, an unstamped diff (it may be the newer run's, not yet stamped).
//
// Run by actions/github-script (`github`, `context`, `core`); everything else comes from the environment:
// PROJECT (Pulumi.yaml's name), STATE, HEAD_SHA (the commit this run checks), LOG_URL (this run's attempt),
// STACK_NAME (the stack-name given to pulumi/actions; all but not-previewed), NEEDS (not-previewed).
module.exports = async ({ github, context, core }) => {
  const { PROJECT, STATE, STACK_NAME, HEAD_SHA, LOG_URL, NEEDS } = process.env;
  const prefix = `#### :tropical_drink: \`preview\` on ${PROJECT}/`;
  const summary = "<summary>Pulumi report</summary>";
  const stamp = `<!-- gpu-eks:preview-of ${HEAD_SHA} -->`;
  const stampOf = (body) => /<!-- gpu-eks:preview-of ([0-9a-f]+) -->/.exec(body)?.[1];
  const stackOf = (body) => body.slice(prefix.length).split("\n", 1)[0];
  const { owner, repo } = context.repo;
  const issue_number = context.payload.pull_request.number;
  const { data: pull } = await github.rest.pulls.get({ owner, repo, pull_number: issue_number });
  const current = pull.head.sha;
  const comments = (await github.paginate(github.rest.issues.listComments, { owner, repo, issue_number })).filter(
    (c) =>
      c.user?.login === "github-actions[bot]" && // `user` is null for a deleted account
      c.body.startsWith(prefix) &&
      c.body.includes(summary) &&
      (!STACK_NAME || stackOf(c.body) === STACK_NAME) &&
      !(stampOf(c.body) === current && current !== HEAD_SHA) && // a newer run's
      // Once a newer push exists, an unstamped diff may be the newer run's, written by pulumi/actions a
      // moment before that run stamps it: only the run that wrote it (`previewed`) may touch it.
      !(current !== HEAD_SHA && STATE !== "previewed" && stampOf(c.body) === undefined),
  );
  const log = `[log](${LOG_URL})`;
  const status = (stack, text) =>
    [
      `${prefix}${stack}`,
      "",
      stamp,
      `${text} Any diff that stood here was for an earlier commit and no longer applies (${log}).`,
      "",
      "<details>",
      summary,
      "",
      `No report for ${HEAD_SHA}.`,
      "</details>",
    ].join("\n");
  const why = () => {
    if (current !== HEAD_SHA) {
      return `superseded by ${current}, whose run previews it`;
    }
    const unfinished = Object.entries(JSON.parse(NEEDS))
      .filter(([, need]) => need.result !== "success")
      .map(([job, need]) => `${job}: ${need.result}`);
    return unfinished.length
      ? `the run's jobs did not all succeed (${unfinished.join(", ")})`
      : "this run previews no such stack (its stack file is gone from the branch, or the stack does not exist in the backend yet)";
  };
  const text = {
    previewed: () => `:hourglass: **superseded**: the preview of ${HEAD_SHA} is in another comment of this stack.`,
    failure: () => `:x: **preview failed for ${HEAD_SHA}**.`,
    cancelled: () => `:no_entry_sign: **preview cancelled for ${HEAD_SHA}**.`,
    "not-previewed": () => `:hourglass: **not previewed for ${HEAD_SHA}**: ${why()}.`,
  }[STATE];
  let edited = 0;
  for (const comment of comments) {
    const sha = stampOf(comment.body);
    let body;
    if (STATE === "previewed" && sha === undefined) {
      const [heading, ...rest] = comment.body.split("\n");
      body = [heading, "", stamp, `:white_check_mark: Preview of ${HEAD_SHA} (${log}).`, ...rest].join("\n");
    } else if (sha !== HEAD_SHA || STATE === "failure" || STATE === "cancelled") {
      // For `previewed`: a second comment of the stack is an earlier commit's (pulumi/actions reads only the
      // first page of comments, and posts anew when it finds none there).
      body = status(stackOf(comment.body), text());
    } else {
      continue; // already for this commit
    }
    await github.rest.issues.updateComment({ owner, repo, comment_id: comment.id, body });
    edited += 1;
  }
  // A first preview that failed says so; not when a newer push has made this run's commit old.
  if ((STATE === "failure" || STATE === "cancelled") && comments.length === 0 && current === HEAD_SHA) {
    await github.rest.issues.createComment({ owner, repo, issue_number, body: status(STACK_NAME, text()) });
    edited += 1;
  }
  core.info(`${STATE} for ${HEAD_SHA}: ${edited} preview comment(s) written`);
};
