"""A reply's thought on the page: a folded block above the answer, "Thinking… N s" while the
model thinks and "Thought for N s" after, opened by a click to show the thought as markdown rendered by the gateway (its HTML shown as text);
a page opened mid-thought shows it too. The thought comes from the fake upstream's
[[think:…]] directives (docs/fake-upstream.md)."""

from conftest import wait_for
from test_web import new_conversation, open_conversation


def test_the_thought_is_a_folded_block_above_the_answer(world, owner):
    terminal = world.terminal()
    conversation = new_conversation(terminal, "thinking")
    terminal.call("conversation.attach", {"conversation": conversation})
    page = open_conversation(owner, world, conversation)
    thought = "weigh <img src=x onerror=alert(1)> then <b>decide</b> **firmly**"
    result = terminal.call("message.send", {"conversation": conversation, "content":
                           "[[think:%s]] [[think-delay:300]] [[reply:**Decided**]] go" % thought})
    reply = result["reply"]
    dialogs = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))

    block = "#msg-%s details.thought" % reply
    page.wait_for_selector(block + " summary:text('Thinking…')")
    # A second page opened mid-thought shows it thinking as well.
    late = open_conversation(owner, world, conversation)
    late.wait_for_selector(block + " summary:text('Thinking…')")
    # Folded: the thought is there, but not shown until a click.
    assert not page.is_visible(block + " .thought-text")
    page.click(block + " summary")
    page.wait_for_selector(block + "[open] .thought-text")
    # It stays open as pieces come.
    wait_for(lambda: "decide" in page.text_content(block + " .thought-text"), "more of the thought")
    assert page.query_selector(block + "[open]") is not None

    terminal.wait_event(lambda e: e["method"] == "message.completed" and e["params"]["message"]["id"] == reply, "the reply")
    for p in (page, late):
        p.wait_for_selector("#msg-%s.complete" % reply)
        p.wait_for_selector(block + " summary:text('Thought for')")
        # Above the answer; both rendered markdown, the HTML in them shown as text.
        order = p.evaluate("""id => {
            const el = document.getElementById("msg-" + id);
            const kids = Array.from(el.children);
            return [kids.indexOf(el.querySelector("details.thought")), kids.indexOf(el.querySelector(".body"))];
        }""", reply)
        assert order[0] >= 0 and order[0] < order[1], order
        assert p.query_selector("#msg-%s .body strong" % reply) is not None
        assert p.query_selector("#messages .thought img") is None
        assert p.query_selector("#messages .thought b") is None
        assert p.text_content(block + " .thought-text strong") == "firmly"
    text = page.text_content(block + " .thought-text").strip()
    assert text == thought.replace("**", ""), text
    assert page.query_selector(block + "[open]") is not None, "a click opened it; the end keeps it open"
    assert not late.is_visible(block + " .thought-text"), "folded where nobody opened it"
    # After a reload, from the stored reply.
    late.reload()
    late.wait_for_selector(block + " summary:text('Thought for')")
    assert dialogs == []
    page.close()
    late.close()
    terminal.close()
