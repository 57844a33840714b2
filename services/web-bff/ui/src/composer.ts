/**
 * The message box: text, image attachments (file picker, paste or drop; PNG, JPEG, GIF,
 * WebP within the service's limits), Send, and Cancel while the agent works.
 * Enter sends, Shift+Enter starts a new line.
 */
import { h, replace } from './dom.ts';
import { IMAGE_TYPES, imageProblem } from '@bedrock/agent-view/format';

export interface Attachment {
  readonly mediaType: string;
  readonly data: Uint8Array;
}

export interface ComposerActions {
  /** Resolves true when the message was accepted (the box is then cleared). */
  send(text: string, images: Attachment[]): Promise<boolean>;
  cancel(): void;
  problem(message: string): void;
}

interface Pending {
  readonly file: File;
  readonly url: string;
}

export class Composer {
  readonly el: HTMLFormElement;
  private readonly input: HTMLTextAreaElement;
  private readonly sendButton: HTMLButtonElement;
  private readonly cancelButton: HTMLButtonElement;
  private readonly fileInput: HTMLInputElement;
  private readonly thumbs: HTMLElement;
  private readonly hint: HTMLElement;
  private pending: Pending[] = [];
  private busy = false;
  private sending = false;

  constructor(private readonly actions: ComposerActions) {
    this.input = h('textarea', {
      id: 'message-input',
      rows: 3,
      placeholder: 'Message the agent… (Enter to send, Shift+Enter for a new line)',
      'aria-describedby': 'composer-hint',
    });
    this.fileInput = h('input', {
      type: 'file',
      accept: IMAGE_TYPES.join(','),
      multiple: true,
      class: 'visually-hidden',
      tabindex: -1,
      'aria-hidden': 'true',
    });
    this.sendButton = h('button', { type: 'submit', class: 'primary' }, 'Send');
    this.cancelButton = h('button', { type: 'button', class: 'danger', hidden: true, onclick: () => this.actions.cancel() }, 'Cancel');
    this.thumbs = h('ul', { class: 'attachments', 'aria-label': 'Attached images' });
    this.hint = h('span', { id: 'composer-hint', class: 'composer-hint' });
    const attach = h('button', { type: 'button', class: 'secondary', onclick: () => this.fileInput.click() }, 'Attach image');
    this.el = h(
      'form',
      { class: 'composer', 'aria-label': 'Send a message' },
      h('label', { for: 'message-input', class: 'visually-hidden' }, 'Message'),
      this.input,
      this.thumbs,
      h(
        'div',
        { class: 'composer-row' },
        attach,
        this.fileInput,
        this.hint,
        h('span', { class: 'spacer' }),
        this.cancelButton,
        this.sendButton,
      ),
    );
    this.el.addEventListener('submit', (ev) => {
      ev.preventDefault();
      void this.submit();
    });
    this.input.addEventListener('keydown', (ev) => {
      if (ev.key === 'Enter' && !ev.shiftKey && !ev.isComposing) {
        ev.preventDefault();
        void this.submit();
      }
    });
    this.input.addEventListener('paste', (ev) => {
      const files = [...(ev.clipboardData?.files ?? [])];
      if (files.length) {
        ev.preventDefault();
        this.addFiles(files);
      }
    });
    this.el.addEventListener('dragover', (ev) => ev.preventDefault());
    this.el.addEventListener('drop', (ev) => {
      const files = [...(ev.dataTransfer?.files ?? [])];
      if (files.length) {
        ev.preventDefault();
        this.addFiles(files);
      }
    });
    this.fileInput.addEventListener('change', () => {
      this.addFiles([...(this.fileInput.files ?? [])]);
      this.fileInput.value = '';
    });
  }

  setState(s: { busy: boolean; canCancel: boolean; hidden: boolean }): void {
    this.el.hidden = s.hidden;
    this.busy = s.busy;
    this.cancelButton.hidden = !s.busy;
    this.cancelButton.disabled = !s.canCancel;
    this.sendButton.disabled = s.busy || this.sending;
    this.hint.textContent = s.busy ? 'The agent is working. Cancel it to send a new message now.' : '';
  }

  focus(): void {
    this.input.focus();
  }

  dispose(): void {
    for (const p of this.pending) URL.revokeObjectURL(p.url);
    this.pending = [];
  }

  private addFiles(files: File[]): void {
    for (const file of files) {
      const problem = imageProblem(file.type, file.size, this.pending.length);
      if (problem) {
        this.actions.problem(`${file.name}: ${problem}`);
        continue;
      }
      this.pending.push({ file, url: URL.createObjectURL(file) });
    }
    this.renderThumbs();
  }

  private renderThumbs(): void {
    replace(
      this.thumbs,
      this.pending.map((p, i) =>
        h(
          'li',
          { class: 'attachment' },
          h('img', { src: p.url, alt: p.file.name, class: 'thumb' }),
          h('button', { type: 'button', class: 'remove', 'aria-label': `Remove ${p.file.name}`, onclick: () => this.remove(i) }, '×'),
        ),
      ),
    );
  }

  private remove(i: number): void {
    const [p] = this.pending.splice(i, 1);
    if (p) URL.revokeObjectURL(p.url);
    this.renderThumbs();
    this.input.focus();
  }

  private async submit(): Promise<void> {
    if (this.busy || this.sending) return;
    const text = this.input.value;
    if (!text.trim() && this.pending.length === 0) return;
    this.sending = true;
    this.sendButton.disabled = true;
    try {
      const images = await Promise.all(
        this.pending.map(async (p) => ({ mediaType: p.file.type, data: new Uint8Array(await p.file.arrayBuffer()) })),
      );
      if (await this.actions.send(text, images)) {
        this.input.value = '';
        this.dispose();
        this.renderThumbs();
      }
    } finally {
      this.sending = false;
      this.sendButton.disabled = this.busy;
    }
  }
}
