; KV Studio's Windows installer: a per-user install (no administrator prompt) of the PyInstaller
; one-folder app, a Start menu entry, and an uninstaller listed in Settings > Apps.
;
;   makensis -WX -DAPP_DIR=<folder with kvstudio.exe> -DVERSION=0.1.0 -DOUT_FILE=<setup.exe> kvstudio.nsi
;
; packaging/windows_installer.py runs this; tests/packaging compiles it on Linux against a
; stand-in folder. The user's data (%APPDATA%\KVStudio\KV Studio: conversations, settings,
; backends) and models never live in the install folder, and the uninstaller leaves them.

Unicode true
; The app is 64-bit only (llama.cpp's x64 build): a 64-bit installer says so on 32-bit Windows
; instead of installing something that cannot start.
Target amd64-unicode

!ifndef APP_DIR | VERSION | OUT_FILE
  !error "Pass -DAPP_DIR=<the one-folder app> -DVERSION=<x.y.z> -DOUT_FILE=<installer.exe>."
!endif
!ifndef VERSION_QUAD
  !define VERSION_QUAD "0.0.0.0"  ; Windows' numeric file version; windows_installer.py derives it
!endif

!define NAME "KV Studio"
!define EXE "kvstudio.exe"
!define UNINSTALLER "Uninstall KV Studio.exe"
!define UNINSTALL_KEY "Software\Microsoft\Windows\CurrentVersion\Uninstall\KVStudio"
!define SHORTCUT "$SMPROGRAMS\${NAME}.lnk"
!define ICON "${__FILEDIR__}/../../assets/icons/kvstudio.ico"

Name "${NAME}"
OutFile "${OUT_FILE}"
RequestExecutionLevel user
InstallDir "$LOCALAPPDATA\Programs\${NAME}"
; An upgrade goes where the user put the last install.
InstallDirRegKey HKCU "${UNINSTALL_KEY}" "InstallLocation"
SetCompressor /SOLID lzma
ManifestDPIAware true
BrandingText "${NAME} ${VERSION}"

!include "MUI2.nsh"
!include "FileFunc.nsh"

!define MUI_ICON "${ICON}"
!define MUI_UNICON "${ICON}"
!define MUI_ABORTWARNING

!define MUI_PAGE_CUSTOMFUNCTION_LEAVE CheckInstallFolder
!insertmacro MUI_PAGE_DIRECTORY
!insertmacro MUI_PAGE_INSTFILES
!define MUI_FINISHPAGE_RUN "$INSTDIR\${EXE}"
!define MUI_FINISHPAGE_RUN_PARAMETERS "gui"
!insertmacro MUI_PAGE_FINISH

!insertmacro MUI_UNPAGE_CONFIRM
!insertmacro MUI_UNPAGE_INSTFILES

!insertmacro MUI_LANGUAGE "English"

VIProductVersion "${VERSION_QUAD}"
VIAddVersionKey "ProductName" "${NAME}"
VIAddVersionKey "ProductVersion" "${VERSION}"
VIAddVersionKey "FileVersion" "${VERSION}"
VIAddVersionKey "FileDescription" "${NAME} ${VERSION} setup"
VIAddVersionKey "LegalCopyright" "MIT License"

; The uninstaller removes the whole install folder, so the installer only takes a folder that is
; empty, new, or an earlier KV Studio install (which the new version replaces).
Function CheckInstallFolder
  IfFileExists "$INSTDIR\${EXE}" done
  FindFirst $0 $1 "$INSTDIR\*"
  loop:
    StrCmp $1 "" empty
    StrCmp $1 "." next
    StrCmp $1 ".." next
    FindClose $0
    MessageBox MB_OK|MB_ICONEXCLAMATION "$INSTDIR already holds other files. Choose an empty or new folder: uninstalling ${NAME} removes its whole folder." /SD IDOK
    Abort
  next:
    FindNext $0 $1
    Goto loop
  empty:
    FindClose $0
  done:
FunctionEnd

Section "${NAME}"
  ; A silent install (/S) skips the folder page, and so its check.
  IfSilent 0 +2
    Call CheckInstallFolder
  ; An upgrade replaces the whole app: a file the new version dropped must not stay behind for
  ; the bundle to load.
  IfFileExists "$INSTDIR\${EXE}" 0 +2
    RMDir /r "$INSTDIR"

  SetOutPath "$INSTDIR"
  File /r "${APP_DIR}/*"
  File "/oname=kvstudio.ico" "${ICON}"
  WriteUninstaller "$INSTDIR\${UNINSTALLER}"

  CreateShortcut "${SHORTCUT}" "$INSTDIR\${EXE}" "gui" "$INSTDIR\kvstudio.ico" 0

  WriteRegStr HKCU "${UNINSTALL_KEY}" "DisplayName" "${NAME}"
  WriteRegStr HKCU "${UNINSTALL_KEY}" "DisplayVersion" "${VERSION}"
  WriteRegStr HKCU "${UNINSTALL_KEY}" "Publisher" "The KV Studio developers"
  WriteRegStr HKCU "${UNINSTALL_KEY}" "DisplayIcon" "$INSTDIR\kvstudio.ico"
  WriteRegStr HKCU "${UNINSTALL_KEY}" "InstallLocation" "$INSTDIR"
  WriteRegStr HKCU "${UNINSTALL_KEY}" "UninstallString" '"$INSTDIR\${UNINSTALLER}"'
  WriteRegStr HKCU "${UNINSTALL_KEY}" "QuietUninstallString" '"$INSTDIR\${UNINSTALLER}" /S'
  WriteRegDWORD HKCU "${UNINSTALL_KEY}" "NoModify" 1
  WriteRegDWORD HKCU "${UNINSTALL_KEY}" "NoRepair" 1
  ${GetSize} "$INSTDIR" "/S=0K" $0 $1 $2
  IntFmt $0 "0x%08X" $0
  WriteRegDWORD HKCU "${UNINSTALL_KEY}" "EstimatedSize" "$0"
SectionEnd

; Only what the installer made: the install folder, the shortcut and the uninstall entry. The
; user's data folder and models stay for a later install.
Section "Uninstall"
  Delete "${SHORTCUT}"
  DeleteRegKey HKCU "${UNINSTALL_KEY}"
  ; The uninstaller runs from a copy in the temp folder; leave $INSTDIR so it can go.
  SetOutPath "$TEMP"
  RMDir /r "$INSTDIR"
  ; Say where the user's things stay, so nobody thinks they are gone (or wonders where the
  ; disk space went). /SD: a silent uninstall does not wait for a click.
  MessageBox MB_OK|MB_ICONINFORMATION "${NAME} is removed. Your conversations, settings and backends stay in %APPDATA%\KVStudio\KV Studio, and downloaded models in %USERPROFILE%\.cache\huggingface\hub and any model folders you added; delete those folders to free their space." /SD IDOK
SectionEnd
