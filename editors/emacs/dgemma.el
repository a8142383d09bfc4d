;;; dgemma.el --- Ghost text from DiffusionGemma via lsp-mode  -*- lexical-binding: t; -*-

;; Copyright 2026 The dgemma-lsp authors
;; SPDX-License-Identifier: Apache-2.0

;; Version: 0.1.0
;; Package-Requires: ((emacs "28.1") (lsp-mode "10.0.0"))
;; Keywords: languages, tools, convenience

;;; Commentary:

;; Registers the dgemma-lsp language server with lsp-mode, as an add-on
;; server that runs beside whatever server a buffer already has.  lsp-mode's
;; inline completion (lsp-inline-completion.el, lsp-mode 10.0.0 and newer)
;; shows its suggestions as ghost text while you type:
;;
;;   C-c \            ask for a suggestion now (M-x dgemma-suggest): shown
;;                    whatever `dgemma-eagerness' says, and the way to get
;;                    one when `dgemma-trigger' is "manual"
;;   TAB or C-c C-a   accept the suggestion shown (TAB indents when none is,
;;                    or when it appeared too recently to have been read)
;;   C-n / C-p        other candidates (server option completion.candidates)
;;   any other key    dismisses it
;;
;; A slow answer is drawn at point as it settles (`dgemma/resolving'): the
;; sure parts as ghost text, the rest dimmer; only a preview, that no key
;; accepts and any key removes.  The answer's unsure parts are drawn dimmer
;; too (`dgemma/confidence', server option completion.showConfidence).
;;
;; A TAB that indents asks for no suggestion.  "Rewrite block with
;; DiffusionGemma" (a code action, or M-x dgemma-rewrite-block) is shown as a
;; preview in the buffer, applied only when accepted (TAB or C-c C-c; C-g or
;; C-c C-k rejects).
;;
;; The mode line shows the model, the device, the model's last latency and
;; the workspace index's progress, from the server's `dgemma/status'
;; notification (which the server sends because this client declares that it
;; handles it).
;;
;; Setup (see editors/emacs/README.md):
;;
;;   (require 'dgemma)
;;   (add-hook 'python-mode-hook #'lsp-deferred)
;;
;; dgemma requires each part of lsp-mode it needs, so it also works where
;; lsp-mode's autoloads are missing (lsp-mode on `load-path', no package.el).

;;; Code:

(require 'lsp-mode)
;; lsp-mode reaches these through package.el's autoloads when it sets up a
;; buffer; without them that fails with void-function (lsp-lens--enable, ...).
(require 'lsp-completion)
(require 'lsp-diagnostics)
(require 'lsp-headerline)
(require 'lsp-lens)
(require 'lsp-modeline)
(require 'lsp-semantic-tokens)
(require 'lsp-inline-completion)
(require 'diff-mode)  ; the rewrite preview's faces
(require 'face-remap)

(defgroup dgemma nil
  "Code completions from a local DiffusionGemma model (dgemma-lsp)."
  :group 'lsp-mode
  :prefix "dgemma-")

(defcustom dgemma-server-command '("dgemma-lsp" "--stdio")
  "The server command and its arguments.
Use the full path of the command when it is not on `exec-path'."
  :type '(repeat string))

(defcustom dgemma-server-options nil
  "Server options, sent as initializationOptions.
A plist with the server's camelCase names, for example
\(:model \"default\" :device \"cpu\" :completion (:latencyBudgetMs 300))."
  :type 'plist)

(defcustom dgemma-eagerness "balanced"
  "How readily a suggestion is shown while you type.
\"quiet\" shows only those the model's show-or-not decision rates likely to
be taken, \"balanced\" more, \"eager\" every one (a model without such a
decision is eager at every setting).  What `dgemma-suggest' asks for is
shown whatever this says.  Sent to the server as completion.eagerness when
it starts (it takes the place of one in `dgemma-server-options')."
  :type '(choice (const "quiet") (const "balanced") (const "eager")))

(defcustom dgemma-trigger "automatic"
  "When suggestions come: \"automatic\" as you type, \"manual\" only when
asked for with `dgemma-suggest' (then lsp-mode asks for none while you type
in the buffers dgemma-lsp serves).  Sent to the server as completion.trigger
when it starts (it takes the place of one in `dgemma-server-options')."
  :type '(choice (const "automatic") (const "manual")))

(defun dgemma--initialization-options ()
  "`dgemma-server-options' with `dgemma-eagerness' and `dgemma-trigger' in
its :completion."
  (let ((completion (copy-sequence (plist-get dgemma-server-options :completion))))
    (setq completion (plist-put completion :eagerness dgemma-eagerness))
    (setq completion (plist-put completion :trigger dgemma-trigger))
    (plist-put (copy-sequence dgemma-server-options) :completion completion)))

(defcustom dgemma-major-modes
  '(python-mode python-ts-mode js-mode js-ts-mode typescript-mode
    typescript-ts-mode tsx-ts-mode lua-mode lua-ts-mode rust-mode rust-ts-mode
    go-mode go-ts-mode c-mode c-ts-mode c++-mode c++-ts-mode java-mode
    java-ts-mode sh-mode bash-ts-mode)
  "Major modes, and the modes derived from them, that dgemma-lsp serves."
  :type '(repeat symbol))

(defcustom dgemma-idle-delay 0.3
  "Seconds without input after a change before a suggestion is asked for.
It sets `lsp-inline-completion-idle-delay' in the buffers dgemma-lsp
serves: lsp-mode's default, 2 seconds, is long for typing."
  :type 'number)

(defcustom dgemma-accept-after 0.3
  "Seconds a suggestion must have been shown before an accept key takes it.
A key pressed sooner was typed before anyone could read what appeared (a
second quick TAB after an accept, when the next suggestion comes at once):
it does what it does without a suggestion.  About a person's reaction time."
  :type 'number)

(defface dgemma-suggestion
  '((((class color) (min-colors 256) (background dark)) :foreground "#6c6c6c")
    (((class color) (min-colors 256) (background light)) :foreground "#a8a8a8")
    (((class color) (min-colors 16) (background dark)) :foreground "brightblack")
    (((class color) (min-colors 16) (background light)) :foreground "brightblack")
    (t :inherit shadow))
  "Face of the ghost text in the buffers dgemma-lsp serves.
Clearly dimmer than code on dark and on light terminals alike (lsp-mode's
own, `shadow', is colour 249 on a dark terminal: nearly the colour of code)."
  :group 'dgemma)

(defface dgemma-suggestion-unsure
  '((((class color) (min-colors 256) (background dark)) :foreground "#444444")
    (((class color) (min-colors 256) (background light)) :foreground "#d0d0d0")
    (t :inherit dgemma-suggestion))
  "Face of the unsure parts of a suggestion: a slow answer's text that has
not settled yet, and the tokens of an answer the model gave a probability
below 0.5 (off with the server option completion.showConfidence false)."
  :group 'dgemma)

(defvar-local dgemma--shown-at nil
  "When the suggestion shown was first shown (`float-time'), or nil.")

(defvar-local dgemma--shown-text nil
  "What the line would read with the suggestion shown: the same text shown
again (after typing through it, or asked again) is not a new suggestion.")

(defun dgemma-suggestion-readable-p ()
  "Whether a suggestion is shown and has been for `dgemma-accept-after'."
  (and (overlayp lsp-inline-completion--overlay)
       dgemma--shown-at
       (>= (- (float-time) dgemma--shown-at) dgemma-accept-after)))

(defun dgemma-accept ()
  "Accept the suggestion shown, once it has been shown long enough to read.
Sooner, the key does what it does without a suggestion."
  (interactive)
  (if (dgemma-suggestion-readable-p)
      (lsp-inline-completion-accept)
    (lsp-inline-completion-cancel)  ; also takes its keymap away
    (let ((command (key-binding (this-command-keys-vector) t)))
      (when (commandp command)
        (setq this-command command)
        (call-interactively command)))))
(put 'dgemma-accept 'lsp-inline-completion-keep t)

(defun dgemma--set-accept-keys (symbol keys)
  "Set SYMBOL to KEYS, and make KEYS accept the suggestion shown.
They are bound in `lsp-inline-completion-active-map', which is active
only while a suggestion is shown: otherwise they do what they always do."
  (when (boundp symbol)
    (dolist (key (symbol-value symbol))
      (define-key lsp-inline-completion-active-map (kbd key) nil)))
  (set-default symbol keys)
  (dolist (key keys)
    (define-key lsp-inline-completion-active-map (kbd key) #'dgemma-accept)))

(defcustom dgemma-accept-keys '("TAB" "C-c C-a")
  "Keys that accept the suggestion shown, in a terminal and in a GUI.
lsp-mode's own, C-<return>, never reaches Emacs in a terminal."
  :type '(repeat string)
  :set #'dgemma--set-accept-keys)

(defun dgemma--shown ()
  "Note when a new suggestion appeared, and say which keys accept it.
lsp-mode's echo names C-<return>, which a terminal never delivers."
  (dgemma--dim-low)
  (let ((text (concat (buffer-substring-no-properties (line-beginning-position) (point))
                      (overlay-get lsp-inline-completion--overlay 'after-string))))
    (unless (equal text dgemma--shown-text)
      (setq dgemma--shown-at (float-time)
            dgemma--shown-text text)))
  (let ((keys (append dgemma-accept-keys
                      (and (display-graphic-p) '("C-<return>"))))
        (count (length lsp-inline-completion--items))
        (message-log-max nil))
    (message "%s"
             (concat (format "Completion %d/%d" (1+ lsp-inline-completion--current) count)
                     (and (> count 1) ". Next: [C-n]")
                     (format ". Accept: [%s]" (string-join keys "/"))))))

(defun dgemma--after-indent-p ()
  "Whether the change to complete was a TAB that indented (nothing to complete).
For `lsp-inline-completion-inhibit-predicates'."
  (and (bound-and-true-p dgemma-mode)
       (memq last-command (list 'indent-for-tab-command (key-binding (kbd "TAB"))))))

(add-to-list 'lsp-inline-completion-inhibit-predicates #'dgemma--after-indent-p)

(defun dgemma--manual-p ()
  "Whether suggestions come only when asked for (`dgemma-trigger' manual).
For `lsp-inline-completion-inhibit-predicates': no request while typing."
  (and (bound-and-true-p dgemma-mode) (equal dgemma-trigger "manual")))

(add-to-list 'lsp-inline-completion-inhibit-predicates #'dgemma--manual-p)

(defun dgemma-suggest ()
  "Ask for a suggestion at point now, and show it as ghost text.
It is asked as the user's (LSP's Invoked trigger): the server shows it
whatever `dgemma-eagerness' says, and also when `dgemma-trigger' is manual."
  (interactive)
  (unless (dgemma--workspace)
    (user-error "dgemma-lsp does not serve this buffer"))
  (lsp-inline-completion-display))

(defun dgemma--workspace ()
  "The dgemma-lsp workspace of the current buffer, or nil."
  (seq-find (lambda (workspace)
              (eq (lsp--client-server-id (lsp--workspace-client workspace))
                  'dgemma))
            (lsp-workspaces)))

(defun dgemma--activate-p (_file-name mode)
  "Whether dgemma-lsp serves a buffer in major MODE."
  (apply #'provided-mode-derived-p mode dgemma-major-modes))

(defun dgemma--count (n)
  "N with its thousands separated by commas: 1,234."
  (let ((digits (number-to-string n)))
    (while (string-match "\\([0-9]\\)\\([0-9]\\{3\\}\\)\\($\\|,\\)" digits)
      (setq digits (replace-match "\\1,\\2\\3" t nil digits)))
    digits))

(defun dgemma-status-text (status)
  "The mode-line text for STATUS, the params of a `dgemma/status'."
  (let* ((model (lsp-get status :model))
         (name (if (and (stringp model) (not (string-empty-p model)))
                   (file-name-nondirectory (directory-file-name model))
                 "model"))
         (device (lsp-get status :device))
         (latency (lsp-get status :lastLatencyMs))
         (indexing (lsp-get status :indexing))
         (files (and indexing (lsp-get indexing :files)))
         (total (and indexing (lsp-get indexing :total))))
    (pcase (lsp-get status :state)
      ("ready" (string-join
                (delq nil (list "dgemma:" name device
                                (and (numberp latency)
                                     (format "%dms" (round latency)))
                                (and (numberp files)
                                     (concat "indexing " (dgemma--count files)
                                             (and (numberp total)
                                                  (concat "/" (dgemma--count total)))))))
                " "))
      ("failed" (format "dgemma: %s failed" name))
      ("loading" (format "dgemma: loading %s" name))
      (_ "dgemma: loading"))))

(defvar-local dgemma--status-text "dgemma: loading"
  "What the mode line shows of the server's last `dgemma/status'.")

(defvar dgemma-mode-map (make-sparse-keymap)
  "Keys in the buffers dgemma-lsp serves (`dgemma-suggest-keys').")

(defun dgemma--set-suggest-keys (symbol keys)
  "Set SYMBOL to KEYS, and bind KEYS to `dgemma-suggest' in `dgemma-mode-map'."
  (when (boundp symbol)
    (dolist (key (symbol-value symbol))
      (define-key dgemma-mode-map (kbd key) nil)))
  (set-default symbol keys)
  (dolist (key keys)
    (define-key dgemma-mode-map (kbd key) #'dgemma-suggest)))

(defcustom dgemma-suggest-keys '("C-c \\")
  "Keys that ask for a suggestion now (`dgemma-suggest'), in the buffers
dgemma-lsp serves.  C-c followed by punctuation is the minor modes' own."
  :type '(repeat string)
  :set #'dgemma--set-suggest-keys)

(define-minor-mode dgemma-mode
  "Show dgemma-lsp's status in the mode line of a buffer it serves.
lsp-mode turns it on in those buffers.  \\<dgemma-mode-map>\\[dgemma-suggest]
asks for a suggestion now."
  :lighter (:eval (concat " " dgemma--status-text))
  :keymap dgemma-mode-map)

(defvar-local dgemma--ready nil
  "Whether the server's last `dgemma/status' said the model is ready.")

(defun dgemma--on-status (workspace status)
  "Show STATUS, a `dgemma/status' from WORKSPACE, in its buffers' mode line.
When the model has just become ready, ask again where the user typed while
it loaded (those keys got no suggestion)."
  (let ((text (dgemma-status-text status))
        (ready (equal (lsp-get status :state) "ready"))
        became-ready)
    (dolist (buffer (lsp--workspace-buffers workspace))
      (when (lsp-buffer-live-p buffer)
        (lsp-with-current-buffer buffer
          (when (and ready (not dgemma--ready))
            (push (current-buffer) became-ready))
          (setq dgemma--status-text text
                dgemma--ready ready))))
    (when (memq (window-buffer (selected-window)) became-ready)
      ;; Not from inside the process filter: the request waits for its answer.
      (run-at-time 0 nil #'dgemma--ask-again (window-buffer (selected-window)))))
  (force-mode-line-update t))

(defun dgemma--ask-again (buffer)
  "Ask for a suggestion at point in BUFFER, if it is still the one shown."
  (when (and (buffer-live-p buffer)
             (eq buffer (window-buffer (selected-window))))
    (with-current-buffer buffer
      (when (and (bound-and-true-p lsp-inline-completion-mode)
                 (not (dgemma--manual-p))
                 (not (overlayp lsp-inline-completion--overlay)))
        (lsp-inline-completion-display 'implicit)))))

(defvar-local dgemma--face-cookie nil
  "The remapping of lsp-mode's ghost-text face to `dgemma-suggestion'.")

(defun dgemma--configure-buffer ()
  "In a buffer dgemma-lsp serves: its status, suggestions asked sooner and
drawn in `dgemma-suggestion', the accept keys' echo."
  (when (dgemma--workspace)
    (setq-local lsp-inline-completion-idle-delay dgemma-idle-delay)
    (unless dgemma--face-cookie
      (setq dgemma--face-cookie
            (face-remap-add-relative 'lsp-inline-completion-overlay-face 'dgemma-suggestion)))
    (add-hook 'lsp-inline-completion-shown-hook #'dgemma--shown nil t)
    (add-hook 'pre-command-hook #'dgemma--remove-partial nil t)
    (dgemma-mode 1)))

(defun dgemma--unconfigure-buffer ()
  "Undo `dgemma--configure-buffer' when lsp-mode leaves the buffer."
  (when dgemma--face-cookie
    (face-remap-remove-relative dgemma--face-cookie)
    (setq dgemma--face-cookie nil))
  (remove-hook 'lsp-inline-completion-shown-hook #'dgemma--shown t)
  (remove-hook 'pre-command-hook #'dgemma--remove-partial t)
  (dgemma--remove-partial)
  (dgemma-rewrite-reject)
  (dgemma-mode -1))

(add-hook 'lsp-configure-hook #'dgemma--configure-buffer)
(add-hook 'lsp-unconfigure-hook #'dgemma--unconfigure-buffer)

;;; A slow answer as it settles, and the unsure parts of the answer

(defvar-local dgemma--asking nil
  "The request in flight: (VERSION LINE CHARACTER), or nil.")

(defvar-local dgemma--partial nil
  "The overlay of the partial drawn (`dgemma/resolving'), or nil.")

(defvar-local dgemma--low nil
  "The low-confidence ranges of the coming answer's items: ((TEXT . RANGES) ...).")

(defun dgemma--remove-partial ()
  "Take the partial away: any command, a newer request and the answer do."
  (when (overlayp dgemma--partial)
    (delete-overlay dgemma--partial))
  (setq dgemma--partial nil))

(defun dgemma--asking-about (workspace params)
  "The buffer of WORKSPACE whose request in flight PARAMS is about, or nil.
lsp-mode does not show the request's id: matched by uri, version, position."
  (let* ((uri (lsp-get (lsp-get params :textDocument) :uri))
         (position (lsp-get params :position))
         (asked (list (lsp-get params :version)
                      (lsp-get position :line) (lsp-get position :character))))
    (seq-find (lambda (buffer)
                (and (lsp-buffer-live-p buffer)
                     (with-current-buffer buffer
                       (and dgemma--asking (equal dgemma--asking asked)
                            (equal (lsp--buffer-uri) uri)))))
              (lsp--workspace-buffers workspace))))

(defun dgemma--on-resolving (workspace params)
  "Draw PARAMS, a `dgemma/resolving' from WORKSPACE, at point: the settled
runs as ghost text, the rest in `dgemma-suggestion-unsure'."
  (when-let* ((buffer (dgemma--asking-about workspace params)))
    (with-current-buffer buffer
      (let ((text (mapconcat
                   (lambda (span)
                     (propertize (lsp-get span :text) 'face
                                 (if (lsp-get span :settled) 'dgemma-suggestion 'dgemma-suggestion-unsure)))
                   (lsp-get params :spans) "")))
        (unless (overlayp dgemma--partial)
          (setq dgemma--partial (make-overlay (point) (point) nil t nil)))
        (move-overlay dgemma--partial (point) (point))
        (unless (string-empty-p text)
          (put-text-property 0 1 'cursor t text))  ; the cursor stays before it
        (overlay-put dgemma--partial 'after-string text)))))

(defun dgemma--on-confidence (workspace params)
  "Keep the low ranges of PARAMS, a `dgemma/confidence' from WORKSPACE, for
the answer that follows it."
  (when-let* ((buffer (dgemma--asking-about workspace params)))
    (with-current-buffer buffer
      (setq dgemma--low
            (seq-map (lambda (item) (cons (lsp-get item :insertText) (lsp-get item :low)))
                     (lsp-get params :items))))))

(defun dgemma--dim-low ()
  "Draw the low-confidence parts of the suggestion shown dimmer.
The ranges are of its insertText, in code points (lsp-mode's positions)."
  (let* ((item (elt lsp-inline-completion--items lsp-inline-completion--current))
         (text (lsp:inline-completion-item-insert-text item))
         (ranges (and (stringp text) (cdr (assoc text dgemma--low))))
         (after (overlay-get lsp-inline-completion--overlay 'after-string)))
    (when (and ranges (stringp after))
      (let ((after (copy-sequence after))
            (cut (- (length text) (length after))))  ; what is drawn of it ends the text
        (seq-doseq (range ranges)
          (let ((start (max 0 (- (elt range 0) cut)))
                (end (min (length after) (- (elt range 1) cut))))
            (when (< start end)
              (add-face-text-property start end 'dgemma-suggestion-unsure nil after))))
        (overlay-put lsp-inline-completion--overlay 'after-string after)))))

(defun dgemma--display (display &rest args)
  "Around `lsp-inline-completion-display' (DISPLAY, ARGS): note the request in
flight, so that its partials and low ranges are told from others."
  (if (not (dgemma--workspace))
      (apply display args)
    (dgemma--remove-partial)
    (let ((position (lsp--cur-position)))  ; a plist, whatever `lsp-use-plists' says
      (setq dgemma--low nil
            dgemma--asking (list lsp--cur-version (plist-get position :line) (plist-get position :character))))
    (unwind-protect
        (apply display args)
      (setq dgemma--asking nil)
      (dgemma--remove-partial))))

(advice-add 'lsp-inline-completion-display :around #'dgemma--display)

;;; The block rewrite, as a preview

(defconst dgemma--rewrite-title "Rewrite block with DiffusionGemma"
  "The title of the server's rewrite code action.")

(defface dgemma-rewrite-removed
  '((t :inherit diff-removed :strike-through t))
  "Face of the text a rewrite preview would replace."
  :group 'dgemma)

(defface dgemma-rewrite-added
  '((t :inherit diff-added))
  "Face of the text a rewrite preview would put in its place."
  :group 'dgemma)

(defvar-local dgemma--rewrite nil
  "The rewrite shown: (EDIT . OVERLAYS), EDIT the server's WorkspaceEdit.")

(defvar dgemma-rewrite-preview-mode-map
  (let ((map (make-sparse-keymap)))
    (define-key map (kbd "TAB") #'dgemma-rewrite-accept)
    (define-key map (kbd "C-c C-c") #'dgemma-rewrite-accept)
    (define-key map (kbd "C-g") #'dgemma-rewrite-reject)
    (define-key map (kbd "C-c C-k") #'dgemma-rewrite-reject)
    map)
  "Keys while a rewrite is shown.")

(define-minor-mode dgemma-rewrite-preview-mode
  "A rewrite is shown in the buffer.
TAB or C-c C-c accepts it, C-g or C-c C-k rejects it."
  :lighter " dgemma-rewrite"
  (if dgemma-rewrite-preview-mode
      (add-hook 'after-change-functions #'dgemma--rewrite-stale nil t)
    (remove-hook 'after-change-functions #'dgemma--rewrite-stale t)))

(defun dgemma--rewrite-edits (edit)
  "The TextEdits of EDIT, a WorkspaceEdit for the current buffer."
  (let ((changes (lsp:workspace-edit-document-changes? edit)))
    (if (seq-empty-p changes)
        (let ((by-uri (lsp:workspace-edit-changes? edit)))
          (and by-uri (gethash (lsp--buffer-uri) by-uri)))
      (seq-mapcat #'lsp:text-document-edit-edits changes 'list))))

(defun dgemma--rewrite-show (edit)
  "Draw EDIT in the buffer.
The replaced text is struck through, the new text follows it."
  (dgemma-rewrite-reject)
  (when (overlayp lsp-inline-completion--overlay)
    (lsp-inline-completion-cancel))
  (let (overlays)
    (seq-doseq (text-edit (dgemma--rewrite-edits edit))
      (let* ((region (lsp--range-to-region (lsp:text-edit-range text-edit)))
             (overlay (make-overlay (car region) (cdr region) nil t nil)))
        (overlay-put overlay 'face 'dgemma-rewrite-removed)
        (overlay-put overlay 'after-string
                     (propertize (lsp:text-edit-new-text text-edit) 'face 'dgemma-rewrite-added))
        (overlay-put overlay 'dgemma-new-text (lsp:text-edit-new-text text-edit))
        (push overlay overlays)))
    (if (null overlays)
        (message "DiffusionGemma: no rewrite here")
      (setq dgemma--rewrite (cons edit overlays))
      (dgemma-rewrite-preview-mode 1)
      (message "DiffusionGemma rewrite: TAB or C-c C-c accepts, C-g or C-c C-k rejects"))))

(defun dgemma-rewrite-pending ()
  "The rewrite shown, as (START END NEW-TEXT) per change, or nil."
  (mapcar (lambda (overlay)
            (list (overlay-start overlay) (overlay-end overlay) (overlay-get overlay 'dgemma-new-text)))
          (cdr dgemma--rewrite)))

(defun dgemma-rewrite-accept ()
  "Apply the rewrite shown."
  (interactive)
  (let ((edit (car dgemma--rewrite)))
    (dgemma-rewrite-reject)
    (when edit
      (lsp--apply-workspace-edit edit 'code-action))))

(defun dgemma-rewrite-reject ()
  "Take the rewrite shown away; the buffer stays as it is."
  (interactive)
  (mapc #'delete-overlay (cdr dgemma--rewrite))
  (setq dgemma--rewrite nil)
  (when dgemma-rewrite-preview-mode
    (dgemma-rewrite-preview-mode -1)))

(defun dgemma--rewrite-stale (&rest _)
  "The buffer changed under a rewrite shown: it no longer fits."
  (when dgemma--rewrite
    (dgemma-rewrite-reject)
    (message "DiffusionGemma: the buffer changed; the rewrite was dropped")))

(defun dgemma--rewrite-action-p (action)
  "Whether ACTION, a CodeAction, is the server's block rewrite."
  (equal (lsp:code-action-title action) dgemma--rewrite-title))

(defun dgemma--preview-action (action)
  "Resolve ACTION, the server's rewrite, and show it as a preview."
  (let* ((workspace (or (dgemma--workspace) (user-error "dgemma-lsp does not serve this buffer")))
         (resolved (if (lsp:code-action-edit? action)
                       action
                     (with-lsp-workspace workspace
                       (lsp-request "codeAction/resolve" action))))
         (edit (lsp:code-action-edit? resolved)))
    (if edit
        (dgemma--rewrite-show edit)
      (message "DiffusionGemma: no rewrite here"))))

(defun dgemma--execute-code-action (execute action)
  "Around `lsp-execute-code-action' (EXECUTE): the server's rewrite is shown
as a preview to accept or reject, never applied at once (lsp-mode runs a lone
code action without asking, `lsp-auto-execute-action')."
  (if (and (dgemma--rewrite-action-p action) (dgemma--workspace))
      (dgemma--preview-action action)
    (funcall execute action)))

(advice-add 'lsp-execute-code-action :around #'dgemma--execute-code-action)

(defun dgemma-rewrite-block ()
  "Rewrite the block at point (or the region) with DiffusionGemma, as a preview."
  (interactive)
  (let* ((workspace (or (dgemma--workspace) (user-error "dgemma-lsp does not serve this buffer")))
         (actions (with-lsp-workspace workspace
                    (lsp-request "textDocument/codeAction"
                                 (lsp--text-document-code-action-params "refactor.rewrite"))))
         (action (seq-find #'dgemma--rewrite-action-p actions)))
    (if action
        (dgemma--preview-action action)
      (message "DiffusionGemma: no rewrite here"))))

(lsp-register-client
 (make-lsp-client
  :new-connection (lsp-stdio-connection (lambda () dgemma-server-command))
  :activation-fn #'dgemma--activate-p
  :server-id 'dgemma
  :add-on? t
  :priority -1
  :initialization-options #'dgemma--initialization-options
  ;; The server sends custom notifications only to clients that declare them.
  :custom-capabilities '((experimental . ((dgemma . ((status . t) (resolving . t) (confidence . t))))))
  :notification-handlers (ht ("dgemma/status" #'dgemma--on-status)
                             ("dgemma/resolving" #'dgemma--on-resolving)
                             ("dgemma/confidence" #'dgemma--on-confidence))))

(provide 'dgemma)
;;; dgemma.el ends here
